"""The local Spark cluster's servers: ports, commands, the workers' Python without the project."""
import dataclasses
import subprocess

from pipelines.devstack import stack
from pipelines.devstack.settings import SPARK_PORT_SPAN, StackSettings
from pipelines.devstack.spark_cluster import WORKERS, SparkMaster, SparkWorker, cluster_servers, worker_python


def _settings(tmp_path, **kw):
    return StackSettings(state_dir=tmp_path, ports={"postgres": 1, "kafka": 2, "connect": 3, "redis": 4, "search": 5,
                                                    "spark": 47000}, **kw)


def test_master_and_workers_each_have_their_own_ports_work_dir_and_limits(tmp_path):
    s = _settings(tmp_path)
    master, *workers = cluster_servers(s)
    assert len(workers) == WORKERS == 2
    ports = [master.port, master.ui_port] + [p for w in workers for p in (w.port, w.ui_port)]
    assert len(set(ports)) == len(ports) and max(ports) < s.spark_port + SPARK_PORT_SPAN
    assert "--properties-file" in master.argv()
    master.prepare()
    assert "spark.master.rest.enabled false" in master.defaults.read_text()  # no port 6066
    argv = workers[0].argv()
    assert argv[argv.index("org.apache.spark.deploy.worker.Worker") + 1] == "spark://127.0.0.1:47000"
    assert argv[argv.index("--cores") + 1] == "1" and argv[argv.index("--memory") + 1] == "2g"
    assert workers[0].work_dir != workers[1].work_dir
    assert {w.name for w in workers} == {"spark-worker-1", "spark-worker-2"}


def test_the_cluster_is_part_of_the_stack_when_asked_for_or_left_running(tmp_path):
    s = _settings(tmp_path)
    names = lambda settings: [x.name for x in stack.servers(settings)]  # noqa: E731
    assert "spark-master" not in names(s)
    assert names(dataclasses.replace(s, spark_cluster=True))[-3:] == ["spark-master", "spark-worker-1",
                                                                        "spark-worker-2"]
    SparkWorker(s, 2).pid_file.parent.mkdir(parents=True, exist_ok=True)
    SparkWorker(s, 2).pid_file.write_text("1 0\n")  # an earlier `up --spark-cluster`: down must stop it
    assert "spark-worker-2" in names(s)


def test_the_workers_python_has_the_dependencies_but_not_the_project(tmp_path):
    python = worker_python(_settings(tmp_path))
    deps = subprocess.run([str(python), "-c", "import pyarrow, confluent_kafka, redis, orjson"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert deps.returncode == 0, deps.stderr
    project = subprocess.run([str(python), "-c", "import pipelines"], cwd=tmp_path, capture_output=True, text=True)
    assert project.returncode != 0 and "No module named 'pipelines'" in project.stderr
    assert SparkMaster(_settings(tmp_path)).endpoint() == "spark://127.0.0.1:47000"
