"""Where the Spark job runs: in this process's JVM (`local[...]`), or on a cluster whose executors
may be on other hosts. On a cluster everything the driver and the tasks share goes through Kafka,
the stores or Spark itself, except the checkpoint location: Spark's own checkpoint and cdckit's
state files beside it must be on a file system every host mounts."""
from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit

from pipelines.config import Config
from pipelines.errors import ConfigError

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
