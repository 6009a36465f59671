"""A class-data-sharing archive for the driver JVM (the JDK's AppCDS).

Every `cdckit run`, `bootstrap` and `rebuild` starts a Spark driver JVM that loads thousands of
classes from Spark's jars, parsing and verifying each. Mapped from an archive written by
an earlier JVM they load in a fraction of that: on two cores the session is up in 5.3 s instead of
9.3 s and its first job takes 2.2 s instead of 4.2 s (the restart after a crash gains as much).

The archive is built once per Java and Spark install (`scripts/setup` runs this module: a short
training session whose JVM writes the classes it loaded when it exits) and is named after what it
depends on (the java binary; pyspark's version, jars and their install times, which the JVM checks
too), so a new JDK, pyspark or venv simply finds none. A missing, stale or damaged archive costs
nothing but the gain: the JVM then loads its classes as usual (-Xshare:auto, its CDS lines off).
CDCKIT_CLASS_ARCHIVE=off leaves it out; CDCKIT_CLASS_ARCHIVE_DIR moves it (default
~/.cache/cdckit)."""
from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The JVM's own lines about the archive (a classpath that differs, an archive of another JDK) go
# nowhere: either way it starts, with or without the archive.
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def archive_file() -> Path | None:
    """Where the archive of this Java + Spark install is (whether or not it exists); None without a
    home to keep it in."""
    import pyspark

    java = shutil.which("java", path=os.path.join(os.environ["JAVA_HOME"], "bin")) if os.environ.get("JAVA_HOME") \
        else shutil.which("java")
    jars = Path(pyspark.__file__).parent / "jars"
    # The JVM checks each class-path jar's path, size and time against the archive: a reinstalled
    # pyspark (pip stamps the install time) must find none rather than one the JVM then ignores.
    parts = [pyspark.__version__, _identity(java), str(jars.resolve()),
             *sorted(f"{p.name}:{st.st_size}:{st.st_mtime_ns}" for p in jars.glob("*.jar") for st in [p.stat()])]
    key = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    base = os.environ.get("CDCKIT_CLASS_ARCHIVE_DIR")
    if not base:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
        if cache.startswith("~"):  # no home: nowhere shared to keep it
            return None
        base = os.path.join(cache, "cdckit")
    return Path(base) / f"spark-driver-{key}.jsa"


def _identity(java: str | None) -> str:
    """The java binary the launcher will run, by real path, size and time (a JDK update changes them)."""
    if not java:
        return "no-java"
    real = os.path.realpath(java)
    st = os.stat(real)
    return f"{real}:{st.st_size}:{int(st.st_mtime)}"


def _off() -> bool:
    return os.environ.get("CDCKIT_CLASS_ARCHIVE", "").lower() in ("off", "0", "false", "no")


def _option(name: str, path: Path) -> str:
    """-XX:<name>=<path>, quoted when the path has spaces (Spark splits extraJavaOptions like a shell)."""
    text = str(path)
    return f'-XX:{name}="{text}"' if any(c.isspace() for c in text) else f"-XX:{name}={text}"


def driver_java_options() -> str:
    """The driver JVM's options that map the archive, or "" (none built, or turned off). Never raises:
    it is only a speed-up."""
    if _off():
        return ""
    try:
        path = archive_file()
        if path is None or not os.path.isfile(path):
            return ""
    except (ImportError, OSError, KeyError, ValueError):
        return ""
    return f"{_option('SharedArchiveFile', path)} {_QUIET}"


def build(force: bool = False) -> tuple[Path, float | None]:
    """The archive, built if missing: (its path, seconds the build took, or None when it was there)."""
    path = archive_file()
    if path is None:
        raise RuntimeError("no home directory to keep it in (set CDCKIT_CLASS_ARCHIVE_DIR)")
    if path.is_file() and not force:
        return path, None
    path.parent.mkdir(parents=True, exist_ok=True)
    _prune(path.parent)
    part = path.with_name(f"{path.name}.{os.getpid()}.part")
    print(f"class archive: building {path} (once per Java + Spark install, ~1 min)", flush=True)
    started = time.monotonic()
    # The training's Python workers run this interpreter; its driver listens on loopback only.
    env = {"PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1", **os.environ}
    # Its own session: on a timeout the training's JVM goes too (it would write the part file late).
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.spark.class_archive", "--train", str(part)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        try:
            _, err = proc.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise RuntimeError("the training session took over 600 s") from None
        if proc.returncode != 0 or not part.is_file() or part.stat().st_size == 0:
            tail = " | ".join(line for line in err.strip().splitlines()[-3:])
            raise RuntimeError(f"the training session failed (exit {proc.returncode}): {tail[-600:]}")
        os.replace(part, path)  # whole or not at all: several processes may look for it
    finally:
        part.unlink(missing_ok=True)
    return path, time.monotonic() - started


KEEP = 3                # archives of other installs kept (several checkouts share the cache)


def _prune(folder: Path) -> None:
    """~170 MB each: parts a killed build left (over an hour old: a build has 600 s), and archives
    of earlier installs beyond the newest KEEP."""
    now = time.time()
    for part in folder.glob("spark-driver-*.part"):
        if now - part.stat().st_mtime > 3600:
            part.unlink(missing_ok=True)
    archives = sorted(folder.glob("spark-driver-*.jsa"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in archives[KEEP:]:
        old.unlink(missing_ok=True)


def _train(target: str) -> None:
    """A session doing what cdckit's driver does at start (a Python function over Arrow batches,
    a streaming query with foreachBatch and its checkpoint), then the JVM's exit, which writes the
    classes it loaded into `target`."""
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    with tempfile.TemporaryDirectory(prefix="cdckit-class-archive-") as work:
        conf = (SparkConf().setMaster("local[2]").setAppName("cdckit-class-archive")
                .set("spark.ui.enabled", "false").set("spark.ui.showConsoleProgress", "false")
                .set("spark.sql.shuffle.partitions", "2")
                .set("spark.sql.streaming.stateStore.providerClass",
                     "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
                .set("spark.driver.extraJavaOptions", f"{_option('ArchiveClassesAtExit', Path(target))} {_QUIET}"))
        spark = SparkSession.builder.config(conf=conf).getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        df = spark.range(2000).selectExpr("id", "cast(id as string) AS s", "encode(cast(id AS string), 'utf-8') AS b")
        df.mapInArrow(lambda batches: batches, df.schema).toArrow()

        def each(batch, _id):
            batch.mapInArrow(lambda batches: batches, batch.schema).toArrow()

        query = (spark.readStream.format("rate").option("rowsPerSecond", 200).load()
                 .writeStream.foreachBatch(each).option("checkpointLocation", os.path.join(work, "ckpt"))
                 .trigger(processingTime="200 milliseconds").start())
        deadline = time.monotonic() + 120
        while (query.lastProgress or {}).get("batchId", -1) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        query.stop()
        spark.stop()
        gateway = SparkContext._gateway
        proc = getattr(gateway, "proc", None)
        gateway.shutdown()
        if proc is not None:  # the JVM writes the archive as it exits: wait for that
            proc.stdin.close()
            proc.wait(timeout=300)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--train"]:
        _train(argv[1])
        return 0
    if _off():
        print("class archive: off (CDCKIT_CLASS_ARCHIVE)")
        return 0
    try:
        path, took = build(force="--force" in argv)
    except (RuntimeError, OSError) as exc:   # build turns a timeout into a RuntimeError
        # Only a speed-up: setup goes on without it.
        print(f"class archive: not built ({str(exc)[:300]}); the driver JVM loads its classes as usual")
        return 0
    print(f"class archive: {path}" + (f" (built in {took:.0f} s)" if took is not None else " (there already)"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
