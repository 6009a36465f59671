"""The SparkSession cdckit runs in, with its Kafka source registered.

The driver JVM is started by cdckit itself, in a session of its own: a Ctrl-C at the terminal goes
to the whole foreground process group, and the Python workers Spark forks from that JVM restore
Python's SIGINT handler, so they died mid-task and failed the batch. In its own session the JVM and
its workers see no terminal signal; cdckit's driver decides when to stop (pipelines/stopping.py).
The JVM still ends with the driver: it exits when its stdin pipe closes.

Where the Spark job runs: in this process's JVM (`local[...]`), or on a cluster whose executors
may be on other hosts. On a cluster everything the driver and the tasks share goes through Kafka,
the stores or Spark itself, except the checkpoint location: Spark's own checkpoint and cdckit's
state files beside it must be on a file system every host mounts.
(`check_checkpoint` refuses one that is not, before the session starts.)"""
from __future__ import annotations

import hashlib
import logging
import os
import re
import signal
import sys
import tempfile
import threading
from pathlib import Path
from urllib.parse import urlsplit

from pipelines.config import Config
from pipelines.errors import ConfigError
from pipelines.spark.class_archive import driver_java_options
from pipelines.spark.code_shipping import build_archive
from pipelines.spark.kafka_jars import kafka_source_jars
from pipelines.secrets import mask
from pipelines.temp_files import new_file

log = logging.getLogger("cdckit.spark")

# Network and cluster file systems that give every host one namespace with atomic renames and
# locks that hold across hosts (Spark's checkpoint and cdckit's state files rename into place; the
# rebuild's writer lock is an flock). FUSE mounts of object storage (s3fs, gcsfuse), VM shares (9p,
# virtiofs) and read-only or cache file systems do not promise both, so they need
# `spark.checkpoint_shared: true` from someone who knows theirs does.
SHARED_FS = {"nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "glusterfs", "lustre", "gpfs", "beegfs", "ocfs2", "gfs2",
             "panfs", "wekafs", "quobyte", "efs"}
_LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


def is_local(master: str) -> bool:
    """`local`, `local[4]`, `local[*]`, `local[2,3]`: the executors are the driver's own JVM."""
    return re.fullmatch(r"local(\[[^\]]*\])?", master.strip()) is not None


def _local_cluster(master: str) -> bool:
    """`local-cluster[2,1,1024]`: executors in JVMs of their own, on this host."""
    return re.fullmatch(r"local-cluster\[[^\]]*\]", master.strip()) is not None


def single_host(master: str) -> bool:
    """Local, or a standalone master (every master of an HA list) on loopback: its workers can only
    be on this host, so they share its disk."""
    if is_local(master) or _local_cluster(master):
        return True
    if not master.startswith("spark://"):
        return False
    hosts = [urlsplit(f"spark://{h}").hostname or "" for h in master[len("spark://"):].split(",")]
    return all(h in _LOOPBACK for h in hosts)


def mount_type(path: Path, mounts: str) -> str:
    """The type of the file system holding `path`, from /proc/mounts' text (the longest mount point
    that contains it)."""
    best, kind = "", ""
    target = str(path)
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind


def is_shared(kind: str) -> bool:
    return kind in SHARED_FS or kind.startswith("nfs")


def check_checkpoint(config: Config, mounts: str | None = None) -> None:
    """Refuse a checkpoint on a disk only this host sees when executors may run on others."""
    spark = config.spark
    if single_host(spark.master) or spark.checkpoint_shared:
        return
    if spark.checkpoint_shared is False:
        raise ConfigError("spark.checkpoint_shared", f"false with master {spark.master}: executors on other hosts "
                          "and later drivers (a restart, `cdckit rebuild`, `status`) would not see the checkpoint")
    path = _existing(Path(os.path.abspath(spark.checkpoint_dir)))
    if mounts is None:
        try:
            mounts = Path("/proc/mounts").read_text()
        except OSError:
            mounts = ""
    kind = mount_type(path, mounts)
    if not is_shared(kind):
        raise ConfigError("spark.checkpoint_dir", (
            f"{spark.checkpoint_dir} is on a local file system ({kind or 'unknown'}) but master {spark.master} "
            "runs executors on other hosts, and a restarted driver, `cdckit rebuild` and `status` may run on "
            "another host too: put the checkpoint on a file system every host mounts (NFS, EFS, CephFS, ...) "
            "with atomic renames and locks that hold across hosts, or set spark.checkpoint_shared: true if "
            "this one is such a file system (a FUSE mount of object storage usually is not)"))


def _existing(path: Path) -> Path:
    """The path, or its nearest existing parent (a checkpoint not created yet is on its parent's mount)."""
    while path.parent != path:
        try:
            if path.exists():
                break
        except OSError:  # not readable by this user: judge by its parent
            pass
        path = path.parent
    return path.resolve()


# Spark's own log level (log4j), and whether its console noise is shown: see set_verbose.
SPARK_LOG_LEVEL = {"level": "ERROR"}


def shuffle_partitions(config) -> int:
    """The only SQL shuffle cdckit's queries make is the nested documents' grouping, whose partitions
    are the state's: one per document (more would be empty state stores each batch commits). Set once
    for the session: switching it around the documents' query start raced a batch serializing the
    settings (java.io.OptionalDataException). A query with a checkpoint keeps its count."""
    return len(config.documents) if config.documents else config.spark.shuffle_partitions


def set_verbose(verbose: bool) -> None:
    """`--verbose`: Spark's warnings and the JVM's stderr as they are."""
    SPARK_LOG_LEVEL["level"] = "WARN" if verbose else "ERROR"

_LOG4J2 = """\
status = error
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yyyy-MM-dd HH:mm:ss,SSS} %p spark.%c{1}: %m%n%ex
rootLogger.level = {level}
# Spark sets the root level to this logger's for an interactive driver (pyspark's gateway is one),
# and prints that it did, unless the two agree.
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = {level}
# Under load the tables' batches run past the trigger on purpose (pipelines/streaming/batch_cadence.py).
logger.trigger.name = org.apache.spark.sql.execution.streaming.runtime.ProcessingTimeExecutor
logger.trigger.level = error
rootLogger.appenderRef.stdout.ref = console
"""

# JVM and native-library lines on stderr that say nothing an operator can act on.
_NOISE = re.compile(r"^(WARNING: Using incubator modules|%[4-7]\|\d)")
# The JVM itself failing: shown even without --verbose.
_FATAL = re.compile(r"^(Error: |Exception in thread \"main\"|.*java\.lang\.OutOfMemoryError)")


def spark_conf(config: Config, jars: list[Path]):
    from pyspark import SparkConf

    text = _LOG4J2.replace("{level}", SPARK_LOG_LEVEL["level"])
    log4j = Path(tempfile.gettempdir()) / f"cdckit-log4j2-{hashlib.sha256(text.encode()).hexdigest()[:12]}.properties"
    if not log4j.exists():  # written whole, then renamed: several cdckit processes may start at once
        part = log4j.with_name(f"{log4j.name}.{os.getpid()}")
        part.write_text(text)
        os.replace(part, log4j)
    conf = SparkConf()
    if not submitted():  # under spark-submit its --master decides (and ships the code: --py-files)
        conf.setMaster(config.spark.master)
    conf = (conf.setAppName("cdckit")
            .set("spark.sql.shuffle.partitions", str(shuffle_partitions(config)))
            .set("spark.ui.enabled", "false")
            .set("spark.ui.showConsoleProgress", "false")   # cdckit draws its own progress
            .set("spark.sql.streaming.stopGracefullyOnShutdown", "true")
            # Nested documents' state (pipelines/documents/documents_query.py): RocksDB keeps it off the heap.
            .set("spark.sql.streaming.stateStore.providerClass",
                 "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"))
    user = dict(config.spark.conf)
    # Lists cdckit fills are merged with the user's, never replaced by them.
    listed = {"spark.jars": [str(j) for j in jars],  # Spark's built-in kafka source, for `kafka_source: jvm`
              "spark.submit.pyFiles": [str(build_archive())] if not is_local(config.spark.master) and not submitted()
              else []}  # on a cluster executors get the project's code from the driver, not their Python
    for key, ours in listed.items():
        merged = ours + [f for f in user.pop(key, "").split(",") if f]
        if merged:
            conf.set(key, ",".join(merged))
    options = user.pop("spark.driver.extraJavaOptions", "")
    # The driver's classes mapped from an archive (class_archive.py); spark-submit's JVM is already up.
    archive = "" if submitted() else driver_java_options()
    conf.set("spark.driver.extraJavaOptions",
             " ".join(o for o in (f"-Dlog4j2.configurationFile=file:{log4j}", archive, _driver_jit(options), options)
                      if o))
    for key, value in {**DRIVER_DEFAULTS, **(LOCAL_DEFAULTS if is_local(config.spark.master) else {})}.items():
        conf.set(key, value)
    for key, value in user.items():
        conf.set(key, value)
    return conf


# Measured by benchmarks/cpu_per_change.py (issue #40); a user's spark.conf overrides either.
DRIVER_DEFAULTS = {
    # The default (FileContext) manager renames every offset, commit and state file through
    # Hadoop's local AbstractFileSystem, which runs `readlink` as a child process for each:
    # ~50 processes forked by the driver JVM per micro-batch. The FileSystem-based manager renames
    # with one rename(2): atomic on a local or NFS checkpoint directory, which cdckit requires.
    "spark.sql.streaming.checkpointFileManagerClass":
        "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
    # The nested documents' state store commits each batch as a changelog of what changed, not a
    # RocksDB snapshot (flushed, zipped and copied every batch); snapshots are made in the background.
    # Either format reads the other's checkpoints.
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
}
# Local masters only: executors elsewhere may get cdckit's code only with their first task.
LOCAL_DEFAULTS = {
    # pyspark's daemon with the installed pyspark's bytecode, not the zip Spark puts first (worker_daemon.py).
    "spark.python.daemon.module": "pipelines.spark.worker_daemon",
}


def _driver_jit(options: str) -> str:
    """The driver JVM compiles with C1 only: it plans and schedules, and each micro-batch brought
    freshly generated code for C2 to optimise (its compiler threads took ~0.15 core at every rate,
    more than the driver's own work). A user's own JIT options win."""
    return "" if re.search(r"Tiered|CICompiler|-Xint|-Xcomp", options) else "-XX:TieredStopAtLevel=1"


def _launch_jvm(conf) -> None:
    """The driver JVM in its own session, its stderr read line by line (noise dropped unless
    --verbose), unless this process has one already."""
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway
    from subprocess import PIPE

    if SparkContext._gateway is not None:
        return
    gateway = launch_gateway(conf, popen_kwargs={"start_new_session": True, "stderr": PIPE})
    proc = getattr(gateway, "proc", None)
    if proc is not None and proc.stderr is not None:
        threading.Thread(target=_forward_stderr, args=(proc.stderr,), name="spark-stderr", daemon=True).start()
    SparkContext._gateway, SparkContext._jvm = gateway, gateway.jvm


def end_starting_jvm() -> None:
    """End the driver JVM `_launch_jvm` is still starting (this process's child running
    spark-submit; other children are left alone): one not waited for would end by itself once this
    process's exit closed its stdin, but seconds later. Linux's /proc; elsewhere nothing."""
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (proc / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if parent == os.getpid() and (b"spark-submit" in command or b"deploy.SparkSubmit" in command):
            try:
                os.kill(int(proc.name), signal.SIGTERM)
            except OSError:
                pass


def spark_log_path() -> Path | None:
    """Where this process keeps what the Spark JVM (and the Python workers it runs) wrote."""
    return _SPARK_LOG.get("path")


_SPARK_LOG: dict[str, Path] = {}


def _forward_stderr(stream) -> None:
    """Everything into Spark's log file; on the terminal only with --verbose (minus noise), or a
    line that says the JVM itself is failing. cdckit reports Spark's failures itself, in one line."""
    verbose = SPARK_LOG_LEVEL["level"] != "ERROR"
    path = new_file("spark", "log")
    _SPARK_LOG["path"] = path
    with open(path, "a", buffering=1) as kept:
        for raw in iter(stream.readline, b""):
            line = raw.decode(errors="replace")
            kept.write(mask(line))
            if (verbose and not _NOISE.match(line)) or _FATAL.match(line):
                sys.stderr.write(line)
                sys.stderr.flush()


def _python_path_for_planners(sc) -> None:
    """Spark plans a Python data source's micro-batches in a Python worker of the driver's own, which
    is not given the shipped code (its include list is empty; executors' workers get it): the code
    zips, as the driver holds them, go on that worker's PYTHONPATH through the environment Spark
    passes with every Python function (a path missing on an executor is skipped there)."""
    from pyspark import SparkFiles

    shipped = [os.path.join(SparkFiles.getRootDirectory(), name) for name in getattr(sc, "_python_includes", [])]
    if shipped:
        current = sc.environment.get("PYTHONPATH", "")
        sc.environment["PYTHONPATH"] = os.pathsep.join(shipped + ([current] if current else []))


def submitted() -> bool:
    """Run by spark-submit (its JVM is already there and chose the master)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def spark_session(config: Config):
    if not submitted():  # (spark-submit set up the Python and the addresses itself)
        check_checkpoint(config)
        # The Python the executors run: pyspark takes it from the driver's environment.
        if "spark.pyspark.python" in config.spark.conf:
            os.environ["PYSPARK_PYTHON"] = config.spark.conf["spark.pyspark.python"]
        if single_host(config.spark.master):
            # On this host only: elsewhere the driver's interpreter path means nothing, and a
            # driver bound to loopback cannot be reached by executors on other hosts.
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    jars = kafka_source_jars()
    if config.spark.kafka_source == "jvm" and not jars:
        raise ConfigError("spark.kafka_source", "'jvm' needs the spark-sql-kafka-0-10 jar, which is not "
                          "fetched (run scripts/setup, or name a folder of them in CDCKIT_SPARK_KAFKA_JARS)")
    conf = spark_conf(config, jars)
    # SparkContext installs a SIGINT handler that cancels every job and raises KeyboardInterrupt;
    # the command's own (pipelines/stopping.py) is put back, so Ctrl-C stops after the batch.
    handler = signal.getsignal(signal.SIGINT)
    _launch_jvm(conf)
    spark = SparkSession.builder.config(conf=conf).getOrCreate()
    if submitted():  # the master spark-submit was given, checked now that it is known
        master = spark.sparkContext.master
        if master != config.spark.master:
            log.info("spark-submit's master %s is used (spark.master %s is not)", master, config.spark.master)
        check_checkpoint(config.model_copy(update={"spark": config.spark.model_copy(update={"master": master})}))
    if threading.current_thread() is threading.main_thread() and handler is not None:
        signal.signal(signal.SIGINT, handler)
    spark.sparkContext.setLogLevel(SPARK_LOG_LEVEL["level"])
    _python_path_for_planners(spark.sparkContext)
    if config.spark.kafka_source == "python":
        from pipelines.spark.kafka_source import KafkaDataSource

        spark.dataSource.register(KafkaDataSource)
    return spark
