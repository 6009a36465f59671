"""Java parts of the local stack, resolved from Maven Central by the small poms in `maven/`.

Each component (`kafka`, `connect`, `debezium`, `spark-kafka`) is one pom; Maven copies its jars
and their dependencies into `<jars dir>/<component>/`. The poms take the server versions as
properties (`${kafka.version}`...) from versions.env, the file compose reads too (versions.py). A
folder is reused while the pom it came from is unchanged (a stamp holds the hash of the pom with its
properties filled in: a bump in versions.env is a changed pom), so a second setup runs no Maven at
all; a resolved folder is also kept per pom hash for every checkout of the host (shared_dir), so a
fresh clone links it instead of running Maven; Maven's own repository (~/.m2) keeps the downloads,
so even a changed pom fetches only what is new.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from pipelines.devstack.packages import MissingPackage, system_binary
from pipelines.devstack.versions import maven_properties
from pipelines.spark.kafka_jars import STAMP  # the shipped side reads the same stamp

POMS = Path(__file__).with_name("maven")
COMPONENTS = ("kafka", "connect", "debezium", "spark-kafka", "opensearch")
# Java sources compiled against a component's jars into its folder (classes/).
_SOURCES = {"opensearch": POMS / "OpenSearchNode.java"}


def jars_dir() -> Path:
    """One cache for every state dir (tests and benchmarks run stacks of their own)."""
    default = Path(__file__).resolve().parents[2] / ".devstack" / "jars"
    return Path(os.environ.get("CDCKIT_JARS_DIR", default)).resolve()


def shared_dir() -> Path:
    """Resolved folders kept for every checkout of this host, by pom hash (CDCKIT_JARS_CACHE, default
    ~/.cache/cdckit/jars): a fresh clone's setup links them instead of running Maven (~27 s on two cores)."""
    named = os.environ.get("CDCKIT_JARS_CACHE")
    if named:
        return Path(named).resolve()
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "cdckit" / "jars"


def _shared(component: str) -> Path:
    return shared_dir() / f"{component}-{pom_hash(component)[:16]}"


def _pom(component: str) -> Path:
    return POMS / f"{component}.pom.xml"


def resolved_pom(component: str, versions_file: Path | None = None) -> str:
    """The pom as Maven reads it: its `${property}` versions filled in from versions.env (or
    `versions_file`)."""
    text = _pom(component).read_text()
    for name, value in maven_properties(versions_file).items():
        text = text.replace("${" + name + "}", value)
    return text


def pom_hash(component: str) -> str:
    digest = hashlib.sha256(resolved_pom(component).encode())
    if component in _SOURCES:
        digest.update(_SOURCES[component].read_bytes())
    return digest.hexdigest()


def component_dir(component: str) -> Path:
    """The component's jars; raises MissingPackage when `scripts/setup` has not fetched them."""
    folder = jars_dir() / component
    stamp = folder / STAMP
    if not stamp.exists() or stamp.read_text().strip() != pom_hash(component):
        raise MissingPackage(component, f"the jars of {_pom(component).name} (in {folder})")
    return folder


def fetch(component: str, say=print) -> Path:
    """Resolve the component's jars into the cache unless they are there already."""
    try:
        return component_dir(component)
    except MissingPackage:
        pass
    folder = jars_dir() / component
    folder.parent.mkdir(parents=True, exist_ok=True)
    shared = _shared(component)
    if _stamped(shared, component):
        with tempfile.TemporaryDirectory(dir=folder.parent) as tmp:
            out = Path(tmp) / component
            _link_tree(shared, out)
            _replace(folder, out)
        return folder
    mvn = system_binary("mvn", component, "maven")
    say(f"setup: resolving {component} jars from Maven Central ({_pom(component).name})")
    with tempfile.TemporaryDirectory(dir=folder.parent) as tmp:
        out = Path(tmp) / component
        run = subprocess.run([str(mvn), "-q", "-B", "-f", str(_pom(component)), "dependency:copy-dependencies",
                              "-DincludeScope=runtime", f"-DoutputDirectory={out}",
                              *(f"-D{name}={value}" for name, value in maven_properties().items())],
                             capture_output=True, text=True)
        if run.returncode != 0:
            tail = "\n".join((run.stdout + run.stderr).splitlines()[-15:])
            raise MissingPackage(component, f"the jars of {_pom(component).name}; Maven failed:\n{tail}")
        if component in _SOURCES:
            javac = system_binary("javac", component, "openjdk-17-jdk-headless")
            subprocess.run([str(javac), "-d", str(out / "classes"), "-cp", f"{out}/*", str(_SOURCES[component])],
                           check=True, capture_output=True)
        (out / STAMP).write_text(pom_hash(component) + "\n")
        _keep_shared(out, shared)
        _replace(folder, out)
    return folder


def _stamped(folder: Path, component: str) -> bool:
    stamp = folder / STAMP
    return stamp.is_file() and stamp.read_text().strip() == pom_hash(component)


def _link_tree(source: Path, target: Path) -> None:
    """A copy whose files are hard links where the file system allows (jars are never written in place)."""
    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, target, copy_function=link)


def _replace(folder: Path, fresh: Path) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    fresh.rename(folder)


def _keep_shared(resolved: Path, shared: Path) -> None:
    """The resolved folder kept for other checkouts, whole or not at all; never a reason to fail setup."""
    try:
        shared.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=shared.parent) as tmp:
            part = Path(tmp) / shared.name
            _link_tree(resolved, part)
            if not shared.exists():
                part.rename(shared)
    except OSError:
        pass


def jar_version(component: str, artifact: str) -> str | None:
    """The version of `artifact` among a component's jars (e.g. kafka_2.13 -> 4.3.1)."""
    try:
        folder = component_dir(component)
    except MissingPackage:
        return None
    for jar in folder.glob(f"{artifact}-*.jar"):
        rest = jar.name[len(artifact) + 1:-len(".jar")]
        if rest[:1].isdigit():
            return rest
    return None


def spark_kafka_jars() -> list[Path]:
    """The built-in Kafka source's jars not already in the pyspark wheel; [] when not fetched."""
    try:
        folder = component_dir("spark-kafka")
    except MissingPackage:
        return []
    from pipelines.spark.kafka_jars import not_in_wheel

    return not_in_wheel(folder)


def fetch_all(say=print) -> None:
    for component in COMPONENTS:
        fetch(component, say)


if __name__ == "__main__":
    fetch_all()
