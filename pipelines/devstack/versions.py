"""The server versions of both stacks, from `compose/versions.env`: compose
interpolates them into its image tags (compose/docker-compose.yml), the local stack gives them to
Maven as pom properties and checks its Debian Postgres and Redis against the majors."""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

VERSIONS_FILE = Path(__file__).resolve().parents[2] / "compose" / "versions.env"
PINS = ("KAFKA_VERSION", "DEBEZIUM_VERSION", "OPENSEARCH_VERSION", "POSTGRES_MAJOR", "REDIS_MAJOR")
_LINE = re.compile(r"^([A-Z][A-Z0-9_]*)=([^\s#]+)$")


@lru_cache(maxsize=None)
def pinned(path: Path | None = None) -> dict[str, str]:
    """Every pin of versions.env (or of another such file, given: tests pass theirs rather than
    patch this module, which a test stack starting in another thread reads meanwhile); a missing pin
    or a line that is not KEY=VALUE is an error here, not a Maven failure later (the file is also read
    by `sh` and by Compose)."""
    path = path or VERSIONS_FILE
    pins: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if not match:
            raise ValueError(f"{path}:{number}: not KEY=VALUE: {line!r}")
        pins[match.group(1)] = match.group(2)
    missing = [name for name in PINS if name not in pins]
    if missing:
        raise ValueError(f"{path} pins no {', '.join(missing)}")
    return pins


def maven_properties(versions_file: Path | None = None) -> dict[str, str]:
    """The properties the poms in maven/ take their versions from."""
    pins = pinned(versions_file)
    return {
        "kafka.version": pins["KAFKA_VERSION"],           # kafka_2.13, connect-runtime, connect-json
        "debezium.version": pins["DEBEZIUM_VERSION"],
        # codelibs' runner is versioned as the OpenSearch release it embeds plus a build number.
        "opensearch.runner.version": pins["OPENSEARCH_VERSION"] + ".0",
    }


def major(version_text: str) -> str | None:
    """The major version in a server's version output (`Redis server v=7.0.15 ...` -> 7)."""
    match = re.search(r"v=(\d+)\.|(?<![\d.])(\d+)\.\d+", version_text)
    return (match.group(1) or match.group(2)) if match else None
