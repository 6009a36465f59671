"""Where nested documents' state could live (issue #16), measured: child-row facts folded per root
(a) by Spark 4's `transformWithStateInPandas` keyed by root id, state in the RocksDB state store
(every state read and write is a call from the Python worker to the JVM), and (b) by the pure state
model `derived/nested.py` in one Python process (the cost of the fold itself, no engine), and (c)
by `applyInPandasWithState` with one state per document (the whole model, read and written once
per micro-batch: what the pipeline does).

    .venv/bin/python benchmarks/nested_state.py [--facts 200000] [--roots 20000] [--files 20]

No server is needed: the facts are Parquet files read as a stream (one file per micro-batch), so the
figures are the state machinery's alone. Prints facts/s for each and writes JSON.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import write_result  # noqa: E402


def facts_frame(n: int, roots: int):
    import pandas as pd

    i = pd.RangeIndex(n)
    return pd.DataFrame({"root": (i % roots).astype("int64"), "k": (i % (roots * 5)).astype("int64"),
                         "payload": [f"line {x} of {x % roots}" for x in range(n)], "version": i.astype("int64")})


def spark_rate(folder: Path, n: int, files: int, tmp: Path) -> tuple[float, int]:
    import pandas as pd
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StatefulProcessor

    class Fold(StatefulProcessor):
        def init(self, handle) -> None:
            self.parts = handle.getMapState("parts", "k long", "payload string, version long")

        def handleInputRows(self, key, rows, timerValues):
            top = 0
            for pdf in rows:
                for k, payload, version in zip(pdf["k"], pdf["payload"], pdf["version"]):
                    k, version = int(k), int(version)
                    held = self.parts.getValue((k,)) if self.parts.containsKey((k,)) else None
                    if held is None or version >= held[1]:
                        self.parts.updateValue((k,), (payload, version))
                    top = max(top, version)
            yield pd.DataFrame({"root": [int(key[0])], "version": [top]})

        def close(self) -> None:
            pass

    spark = (SparkSession.builder.master("local[2]").appName("nested-state-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.streaming.stateStore.providerClass",
                     "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    stream = (spark.readStream.schema("root long, k long, payload string, version long")
              .option("maxFilesPerTrigger", 1).parquet(str(folder)))
    emitted = []
    started = time.perf_counter()
    query = (stream.groupBy("root")
             .transformWithStateInPandas(statefulProcessor=Fold(), outputStructType="root long, version long",
                                         outputMode="Update", timeMode="None")
             .writeStream.foreachBatch(lambda df, _id: emitted.append(df.count()))
             .option("checkpointLocation", str(tmp / "ckpt")).trigger(availableNow=True).start())
    query.awaitTermination()
    seconds = time.perf_counter() - started
    spark.stop()
    return n / seconds, sum(emitted)


def spark_document_state_rate(folder: Path, n: int, tmp: Path, roots: int) -> tuple[float, int, int]:
    """(c), what pipelines/documents/documents_query.py does: `applyInPandasWithState` with one group
    per document, its state the whole model, read and written once per micro-batch."""
    import pickle

    import pandas as pd
    from pyspark.sql import SparkSession, functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    spark = (SparkSession.builder.master("local[2]").appName("nested-state-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "1")
             .config("spark.sql.streaming.stateStore.providerClass",
                     "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    sizes: list[int] = []

    def fold(key, frames, state):
        from derived.change import Change, Position, Version
        from derived.nested import DocumentSpec, NestedState, Relation

        if state.exists:
            model = pickle.loads(state.get[0])
        else:
            spec = DocumentSpec("orders", "public.orders", relations=(
                Relation("lines", "public.lines", "one_to_many", (("order_id", "id"),)),))
            model = NestedState(spec, {"public.orders": ("id",), "public.lines": ("k",)})
            for r in range(roots):
                model.apply(Change("public.orders", "upsert", {"id": r}, str(r), {"id": r}, Version(0, 1, r),
                                   Position("t", 0, r)))
        touched = set()
        for pdf in frames:
            for root, k, payload, version in zip(pdf["root"], pdf["k"], pdf["payload"], pdf["version"]):
                touched |= model.apply(Change("public.lines", "upsert", {"k": int(k)}, str(k),
                                              {"k": int(k), "order_id": int(root), "payload": payload},
                                              Version(int(version) + roots, 1, int(version)), Position("t", 0, 0)))
        docs = [model.document(r) for r in touched]
        blob = pickle.dumps(model, protocol=pickle.HIGHEST_PROTOCOL)
        state.update((blob,))
        yield pd.DataFrame({"documents": [len(docs)], "state_bytes": [len(blob)]})

    stream = (spark.readStream.schema("root long, k long, payload string, version long")
              .option("maxFilesPerTrigger", 1).parquet(str(folder)).withColumn("document", F.lit("orders")))
    emitted = []

    def collect(df, _id):
        for row in df.collect():
            emitted.append(row["documents"])
            sizes.append(row["state_bytes"])

    started = time.perf_counter()
    query = (stream.groupBy("document")
             .applyInPandasWithState(fold, "documents long, state_bytes long", "blob binary", "append",
                                     GroupStateTimeout.NoTimeout)
             .writeStream.foreachBatch(collect)
             .option("checkpointLocation", str(tmp / "ckpt-documents")).trigger(availableNow=True).start())
    query.awaitTermination()
    seconds = time.perf_counter() - started
    spark.stop()
    return n / seconds, sum(emitted), max(sizes, default=0)


def model_rate(frame) -> float:
    from derived.change import Change, Position, Version
    from derived.nested import DocumentSpec, NestedState, Relation

    spec = DocumentSpec("orders", "public.orders", relations=(
        Relation("lines", "public.lines", "one_to_many", (("order_id", "id"),)),))
    state = NestedState(spec, {"public.orders": ("id",), "public.lines": ("k",)})
    roots = int(frame["root"].max()) + 1
    for r in range(roots):
        state.apply(Change("public.orders", "upsert", {"id": r}, str(r), {"id": r}, Version(0, 1, r),
                           Position("t", 0, r)))
    started = time.perf_counter()
    touched = set()
    for root, k, payload, version in zip(frame["root"], frame["k"], frame["payload"], frame["version"]):
        touched |= state.apply(Change("public.lines", "upsert", {"k": int(k)}, str(k),
                                      {"k": int(k), "order_id": int(root), "payload": payload},
                                      Version(int(version) + roots, 1, int(version)), Position("t", 0, 0)))
    for r in touched:  # each touched root's document built once, as a batch would
        state.document(r)
    return len(frame) / (time.perf_counter() - started)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--facts", type=int, default=200_000)
    ap.add_argument("--roots", type=int, default=20_000)
    ap.add_argument("--files", type=int, default=20)
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    tmp = Path(tempfile.mkdtemp(prefix="cdckit-nested-"))
    try:
        frame = facts_frame(args.facts, args.roots)
        folder = tmp / "facts"
        folder.mkdir()
        step = -(-len(frame) // args.files)
        for f in range(args.files):
            frame.iloc[f * step:(f + 1) * step].to_parquet(folder / f"part-{f:04d}.parquet")
        model = model_rate(frame)
        print(f"pure state model (derived/nested.py, one process): {model:,.0f} facts/s", flush=True)
        per_doc, documents, state_bytes = spark_document_state_rate(folder, args.facts, tmp, args.roots)
        print(f"applyInPandasWithState, one state per document (the pipeline's choice): {per_doc:,.0f} facts/s "
              f"({documents} documents built; state {state_bytes / 1e6:.1f} MB at the end)", flush=True)
        rate, emitted = spark_rate(folder, args.facts, args.files, tmp)
        print(f"transformWithStateInPandas keyed by root (RocksDB state store, local[2]): {rate:,.0f} facts/s "
              f"({emitted} root updates emitted)", flush=True)
        write_result("nested_state", {"facts": args.facts, "roots": args.roots, "files": args.files,
                                      "model_facts_per_s": round(model), "spark_tws_facts_per_s": round(rate),
                                      "spark_root_updates": emitted,
                                      "spark_per_document_facts_per_s": round(per_doc),
                                      "spark_per_document_state_bytes": state_bytes})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
