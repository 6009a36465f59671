"""The local stack's optional Spark standalone cluster (`devstack up --spark-cluster`): a master
and two workers from the pyspark installation (`spark-class ...deploy.master.Master` /
`...deploy.worker.Worker`), each its own JVM with its own work directory and a core and memory
limit. Executors run in JVMs the workers start, their Python workers under them.

The workers' Python (`<state>/spark/python`) has cdckit's dependencies but not cdckit: the project's
code reaches the executors only as the zip the driver ships (pipelines/spark/code_shipping.py), as on a
real cluster."""
from __future__ import annotations

import site
import subprocess
import sys
from pathlib import Path

import requests

from pipelines.devstack.servers import Server
from pipelines.devstack.settings import StackSettings
from pipelines.spark import installed_pyspark

WORKERS = 2
WORKER_CORES = 1
WORKER_MEMORY = "2g"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def spark_env() -> dict[str, str]:
    return {"SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_DAEMON_MEMORY": "512m"}


def worker_python(settings: StackSettings) -> Path:
    """A Python with this one's packages minus the project: a venv whose only path entry is this
    interpreter's site-packages (a .pth line adds the folder; the editable install's own .pth file
    in it is not run, so `import pipelines` fails there)."""
    home = settings.state_dir / "spark" / "python"
    python = home / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(home)], check=True, capture_output=True)
    packages = next(home.glob("lib/python*/site-packages"))
    (packages / "cdckit-dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    # Its workers import the installed pyspark too, not Spark's zip (pipelines/spark/installed_pyspark.py).
    installed_pyspark.install(packages)
    return python


class SparkMaster(Server):
    name = "spark-master"

    @property
    def port(self) -> int:
        return self.s.spark_port

    @property
    def ui_port(self) -> int:
        return self.s.spark_port + 1

    @property
    def defaults(self) -> Path:
        return self.home / "spark-defaults.conf"

    def argv(self) -> list[str]:
        return [str(spark_home() / "bin" / "spark-class"), "org.apache.spark.deploy.master.Master",
                "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.ui_port),
                "--properties-file", str(self.defaults)]

    def prepare(self) -> None:
        super().prepare()
        # No REST submission server (it would take Spark's default port 6066).
        self.defaults.write_text("spark.master.rest.enabled false\n")

    def env(self) -> dict[str, str]:
        return spark_env()

    def state(self) -> dict:
        return requests.get(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2).json()

    def healthy(self) -> bool:
        return self.state().get("status") == "ALIVE"

    def endpoint(self) -> str:
        return self.s.spark_master_url

    def version(self) -> str:
        import pyspark

        return f"Spark {pyspark.__version__} standalone master"


class SparkWorker(Server):
    """Worker `n` (1-based): its RPC port and web UI above the master's."""

    def __init__(self, settings: StackSettings, n: int = 1):
        super().__init__(settings)
        self.n = n
        self.name = f"spark-worker-{n}"

    @property
    def port(self) -> int:
        return self.s.spark_port + 2 * self.n

    @property
    def ui_port(self) -> int:
        return self.s.spark_port + 2 * self.n + 1

    @property
    def work_dir(self) -> Path:
        return self.home / "work"

    def argv(self) -> list[str]:
        return [str(spark_home() / "bin" / "spark-class"), "org.apache.spark.deploy.worker.Worker",
                self.s.spark_master_url, "--host", "127.0.0.1", "--port", str(self.port),
                "--webui-port", str(self.ui_port), "--cores", str(WORKER_CORES), "--memory", WORKER_MEMORY,
                "--work-dir", str(self.work_dir)]

    def check_installed(self) -> None:
        worker_python(self.s)

    def prepare(self) -> None:
        super().prepare()
        self.work_dir.mkdir(parents=True, exist_ok=True)

    def env(self) -> dict[str, str]:
        return spark_env()

    def healthy(self) -> bool:
        """Registered with the master, and alive."""
        workers = SparkMaster(self.s).state().get("workers", [])
        return any(w.get("port") == self.port and w.get("state") == "ALIVE" for w in workers)

    def version(self) -> str:
        return f"Spark worker ({WORKER_CORES} core, {WORKER_MEMORY[:-1]} GiB)"


def cluster_servers(settings: StackSettings) -> list[Server]:
    return [SparkMaster(settings), *(SparkWorker(settings, n) for n in range(1, WORKERS + 1))]
