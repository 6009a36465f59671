"""Where the job runs, and the checkpoint a cluster needs: refused when only this host sees it."""
import copy
from pathlib import Path

import pytest

from pipelines.config import parse_config
from pipelines.errors import ConfigError
from pipelines.spark.session import check_checkpoint, is_local, mount_type, single_host
from tests.support.configs import BASE

MOUNTS = """\
/dev/vda1 / ext4 rw,relatime 0 0
tmpfs /tmp tmpfs rw 0 0
nfs.example:/exports/cdckit /mnt/shared nfs4 rw,vers=4.2 0 0
s3fs /mnt/bucket fuse.s3fs rw 0 0
/dev/vdb1 /mnt/shared/local ext4 rw 0 0
"""


@pytest.mark.parametrize("master,local,one_host", [
    ("local", True, True), ("local[2]", True, True), ("local[*]", True, True), ("local[2,3]", True, True),
    ("spark://127.0.0.1:7077", False, True), ("spark://localhost:7077,127.0.0.1:7078", False, True),
    ("spark://10.0.0.5:7077", False, False), ("spark://127.0.0.1:7077,10.0.0.5:7077", False, False),
    ("yarn", False, False), ("k8s://https://kube:6443", False, False), ("localhost", False, False),
    ("local-cluster[2,1,1024]", False, True),
])
def test_local_and_single_host_masters(master, local, one_host):
    assert is_local(master) is local
    assert single_host(master) is one_host


def test_the_mount_holding_a_path_is_the_longest_that_contains_it():
    assert mount_type("/mnt/shared/ckpt", MOUNTS) == "nfs4"
    assert mount_type("/mnt/shared/local/ckpt", MOUNTS) == "ext4"
    assert mount_type("/mnt/sharedness", MOUNTS) == "ext4"  # a prefix of the name is not a parent
    assert mount_type("/mnt/bucket/x", MOUNTS) == "fuse.s3fs"
    assert mount_type("/tmp", MOUNTS) == "tmpfs"


def _config(tmp_path, master, ckpt, **spark):
    data = copy.deepcopy(BASE)
    data["spark"] = {"master": master, "checkpoint_dir": ckpt, **spark}
    return parse_config(data)


def test_a_cluster_refuses_a_checkpoint_only_this_host_sees(tmp_path, monkeypatch):
    import pipelines.spark.session as session

    monkeypatch.setattr(session, "_existing", lambda p: p)  # the paths below need not exist here
    for master in ("spark://10.0.0.5:7077", "yarn"):
        with pytest.raises(ConfigError) as err:
            check_checkpoint(_config(tmp_path, master, "/var/lib/ckpt"), MOUNTS)
        assert err.value.field == "spark.checkpoint_dir" and "ext4" in str(err.value)
        check_checkpoint(_config(tmp_path, master, "/mnt/shared/ckpt"), MOUNTS)      # NFS
        # A FUSE mount of object storage: no atomic rename or cross-host lock promised, so vouched for.
        with pytest.raises(ConfigError) as err:
            check_checkpoint(_config(tmp_path, master, "/mnt/bucket/ckpt"), MOUNTS)
        assert "fuse.s3fs" in str(err.value) and "checkpoint_shared" in str(err.value)
        check_checkpoint(_config(tmp_path, master, "/mnt/bucket/ckpt", checkpoint_shared=True), MOUNTS)
        check_checkpoint(_config(tmp_path, master, "/var/lib/ckpt", checkpoint_shared=True), MOUNTS)
        with pytest.raises(ConfigError) as err:
            check_checkpoint(_config(tmp_path, master, "/mnt/shared/ckpt", checkpoint_shared=False), MOUNTS)
        assert err.value.field == "spark.checkpoint_shared"
    # On one host any disk is shared by every executor.
    check_checkpoint(_config(tmp_path, "local[2]", "/var/lib/ckpt"), MOUNTS)
    check_checkpoint(_config(tmp_path, "spark://127.0.0.1:7077", "/var/lib/ckpt"), MOUNTS)


def test_spark_settings_and_checkpoint_uris_are_checked_naming_the_field(tmp_path):
    with pytest.raises(ConfigError) as err:
        _config(tmp_path, "yarn", "s3a://bucket/ckpt")
    assert err.value.field == "spark.checkpoint_dir" and "mounted" in str(err.value)
    with pytest.raises(ConfigError) as err:
        _config(tmp_path, "yarn", "/x", conf={"executor.memory": "2g"})
    assert err.value.field == "spark.conf"
    for own in ("spark.master", "spark.submit.deployMode"):  # cdckit's own fields decide these
        with pytest.raises(ConfigError) as err:
            _config(tmp_path, "yarn", "/x", conf={own: "x"})
        assert err.value.field == "spark.conf" and own in str(err.value)
    cfg = _config(tmp_path, "yarn", "/x", conf={"spark.executor.cores": 2, "spark.dynamicAllocation.enabled": True})
    assert cfg.spark.conf == {"spark.executor.cores": "2", "spark.dynamicAllocation.enabled": "true"}


def test_spark_conf_merges_with_what_cdckit_sets(tmp_path):
    from pipelines.spark.session import spark_conf

    cfg = _config(tmp_path, "spark://10.0.0.5:7077", "/x", checkpoint_shared=True, conf={
        "spark.jars": "/opt/extra.jar", "spark.submit.pyFiles": "/opt/udfs.zip",
        "spark.driver.extraJavaOptions": "-Dfoo=1", "spark.executor.memory": "3g"})
    conf = dict(spark_conf(cfg, [Path("/jars/kafka.jar")]).getAll())
    assert conf["spark.jars"] == "/jars/kafka.jar,/opt/extra.jar"
    shipped, theirs = conf["spark.submit.pyFiles"].split(",")
    assert Path(shipped).name.startswith("cdckit-") and theirs == "/opt/udfs.zip"
    assert conf["spark.driver.extraJavaOptions"].startswith("-Dlog4j2.configurationFile=")
    assert conf["spark.driver.extraJavaOptions"].endswith(" -Dfoo=1")
    assert conf["spark.executor.memory"] == "3g" and conf["spark.master"] == "spark://10.0.0.5:7077"
    local = dict(spark_conf(_config(tmp_path, "local[2]", "/x", conf={"spark.submit.pyFiles": "/opt/udfs.zip"}),
                            []).getAll())
    assert local["spark.submit.pyFiles"] == "/opt/udfs.zip"  # nothing shipped to a local master
