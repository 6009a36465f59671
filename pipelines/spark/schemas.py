"""Arrow schemas as Spark sees them: the one place that maps an Arrow type to Spark's.

The executors speak Arrow (mapInArrow, the data source's batches); Spark wants a DDL string or a
StructType for the same columns. pyspark is imported only to build a StructType.
"""
from __future__ import annotations

import pyarrow as pa

# Arrow type -> (Spark DDL, pyspark.sql.types class name)
_TYPES = {pa.binary(): ("binary", "BinaryType"), pa.string(): ("string", "StringType"),
          pa.int32(): ("int", "IntegerType"), pa.int64(): ("bigint", "LongType"),
          pa.float64(): ("double", "DoubleType"), pa.timestamp("us", tz="UTC"): ("timestamp", "TimestampType"),
          pa.bool_(): ("boolean", "BooleanType"), pa.list_(pa.int64()): ("array<bigint>", None)}


def ddl(schema: pa.Schema) -> str:
    """The schema as Spark DDL, e.g. for mapInArrow's declared output."""
    return ", ".join(f"`{f.name}` {_TYPES[f.type][0]}" for f in schema)


def struct_type(schema: pa.Schema):
    """The schema as a Spark StructType (every field nullable, as Arrow's are)."""
    from pyspark.sql import types

    def spark_type(t: pa.DataType):
        if pa.types.is_list(t):
            return types.ArrayType(spark_type(t.value_type))
        return getattr(types, _TYPES[t][1])()

    return types.StructType([types.StructField(f.name, spark_type(f.type)) for f in schema])
