"""compose/Dockerfile rehearsed without a Docker engine (tests/support/image_rehearsal.py): its
instructions run in a debootstrap'd bookworm root stripped like python:3.11-slim-bookworm's base
(built once a week and kept, as docker keeps a pulled base image: tests/support/image_rehearsal.py),
then the image's entrypoint runs as its user: `cdckit --help`, and `cdckit config check` on the
config compose mounts, with the environment compose gives the container. Slow (minutes: a Debian
root, a JRE, pyspark), so marked `slow`; it is in CI (scripts/test). It skips only when debootstrap
cannot reach the Debian mirror."""
from __future__ import annotations

import shutil
import time

import pytest

from tests.support import image_rehearsal as rehearsal
from tests.support.compose_tools import COMPOSE_DIR, rendered

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def image():
    import os

    if os.geteuid() != 0:
        pytest.fail("the image rehearsal needs root (debootstrap, chroot, mount): run the tests as root")
    if not shutil.which("debootstrap") or not shutil.which("unshare"):
        pytest.fail("debootstrap is not installed: apt-get install debootstrap (scripts/setup does)")
    root = rehearsal.new_root()
    image = rehearsal.Image(root)
    started = time.monotonic()
    try:
        try:
            rehearsal.bootstrap_root(root, image)
        except rehearsal.MirrorUnreachable as exc:
            pytest.skip(str(exc))
        rehearsal.run_dockerfile(image, rehearsal.wheelhouse())
        image.timings["total"] = round(time.monotonic() - started, 1)
        print(f"\nimage rehearsal timings (s): {image.timings}")
        yield image
    finally:
        rehearsal.remove_root(root)


def _container_env():
    return rendered(COMPOSE_DIR / ".env.example")["services"]["cdckit"]["environment"]


def test_the_root_is_stripped_like_the_slim_base(image):
    assert (image.root / "etc/dpkg/dpkg.cfg.d/docker").read_text() == rehearsal.SLIM_DPKG_EXCLUDES
    # Only what the Dockerfile itself creates: the man1 folder the JRE's postinst needs, still empty
    # of pages (dpkg excludes them), the same as in the slim image.
    assert [p.name for p in (image.root / "usr/share/man").iterdir()] == ["man1"]


def test_java_home_is_a_jre_of_this_architecture(image):
    run = rehearsal.in_root(image, '"$JAVA_HOME/bin/java" -version 2>&1', user="10001:10001")
    assert run.returncode == 0 and 'version "17.' in run.stdout, run.stdout + run.stderr


def test_the_entrypoint_runs_as_the_image_user(image):
    assert image.user == "10001:10001" and image.entrypoint == ["cdckit"]
    run = rehearsal.as_container(image, ["--help"], {})
    assert run.returncode == 0 and "bootstrap" in run.stdout, run.stdout + run.stderr


def test_config_check_passes_on_the_mounted_compose_config(image):
    env = _container_env()
    shutil.copytree(COMPOSE_DIR / "config", image.root / env["CDCKIT_CONFIG"].rsplit("/", 1)[0].lstrip("/"),
                    dirs_exist_ok=True)
    run = rehearsal.as_container(image, ["config", "check", "-c", env["CDCKIT_CONFIG"]], env)
    assert run.returncode == 0, run.stdout + run.stderr
    # And through CDCKIT_CONFIG alone, as `docker compose exec cdckit cdckit ...` runs it.
    assert rehearsal.as_container(image, ["config", "check"], env).returncode == 0


def test_the_job_check_is_in_the_image(image):
    run = rehearsal.in_root(image, "python /opt/cdckit/job_health.py", user="10001:10001")
    assert run.returncode == 1 and "do not answer" in run.stdout, run.stdout + run.stderr
