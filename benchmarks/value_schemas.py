"""What `value.converter.schemas.enable=true` would cost: a Debezium change record of the benchmarks' table
(10 columns) with and without its value schema, bytes and orjson decode rate, one core. Why cdckit reads
column types from the catalog instead (connectors/typed_values.py, README "Typed documents")."""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import write_result  # noqa: E402
import json
import time

import orjson
cols = [("id","int64",None),("name","string",None),("email","string",None),("balance","string","io.debezium.data.VariableScaleDecimal"),
        ("tags","array",None),("updated_at","string","io.debezium.time.ZonedTimestamp"),("seq","int64",None),
        ("born","int32","io.debezium.time.Date"),("seen","int64","io.debezium.time.MicroTimestamp"),("doc","string","io.debezium.data.Json")]
def fld(n,t,name):
    f={"type":t,"optional":n!="id","field":n}
    if name: f.update(name=name, version=1)
    if t=="array": f["items"]={"type":"int32","optional":True}
    return f
row_schema={"type":"struct","fields":[fld(*c) for c in cols],"optional":True,"name":"cdc.public.bench.Value"}
src=[{"type":"string","optional":False,"field":f} for f in ["version","connector","name"]]+[{"type":"int64","optional":False,"field":"ts_ms"},
    {"type":"string","optional":True,"name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":"true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"},"default":"false","field":"snapshot"}]+\
    [{"type":"string","optional":False,"field":f} for f in ["db","schema","table"]]+[{"type":"string","optional":True,"field":"sequence"},{"type":"int64","optional":True,"field":"ts_us"},{"type":"int64","optional":True,"field":"ts_ns"},
    {"type":"int64","optional":True,"field":"txId"},{"type":"int64","optional":True,"field":"lsn"},{"type":"int64","optional":True,"field":"xmin"}]
schema={"type":"struct","fields":[dict(row_schema,field="before"),dict(row_schema,field="after"),
   {"type":"struct","fields":src,"optional":False,"name":"io.debezium.connector.postgresql.Source","field":"source"},
   {"type":"struct","fields":[{"type":"string","optional":False,"field":"id"},{"type":"int64","optional":False,"field":"total_order"},{"type":"int64","optional":False,"field":"data_collection_order"}],"optional":True,"name":"event.block","version":1,"field":"transaction"},
   {"type":"string","optional":False,"field":"op"},{"type":"int64","optional":True,"field":"ts_ms"},{"type":"int64","optional":True,"field":"ts_us"},{"type":"int64","optional":True,"field":"ts_ns"}],
   "optional":False,"name":"cdc.public.bench.Envelope","version":2}
row={"id":5,"name":"customer 5 ünïcødé","email":"c5@example.com","balance":"12.25","tags":[5,5],"updated_at":"2026-11-22T10:00:00.000000Z","seq":5,"born":7005,"seen":1763805600000005,"doc":json.dumps({"tier":2,"n":5})}
payload={"before":None,"after":row,"source":{"version":"3.3.0.Final","connector":"postgresql","name":"cdc","ts_ms":0,"snapshot":"false","db":"cdckit","schema":"public","table":"bench","sequence":"[\"1\",\"2\"]","ts_us":0,"ts_ns":0,"txId":77,"lsn":123456,"xmin":None},"transaction":None,"op":"u","ts_ms":0,"ts_us":0,"ts_ns":0}
plain=orjson.dumps(payload); wrapped=orjson.dumps({"schema":schema,"payload":payload})
def rate(b, n=200000):
    t=time.perf_counter()
    for _ in range(n): orjson.loads(b)
    return n/(time.perf_counter()-t)
result = {"bytes_schemaless": len(plain), "bytes_with_schema": len(wrapped),
          "size_ratio": round(len(wrapped) / len(plain), 2),
          "decode_per_s_schemaless": round(rate(plain)), "decode_per_s_with_schema": round(rate(wrapped))}
print(json.dumps(result))
write_result("value_schemas", result)
