"""Kafka Connect REST client with typed errors.

409 means the worker group is rebalancing: the request is retried with backoff, as the Connect
docs advise, before giving up with ConnectConflict.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import requests

from derived.sinks.retry import retried


class ConnectError(Exception):
    """Base for every Kafka Connect failure; `endpoint` names the URL that failed."""

    exit_code = 4

    def __init__(self, message: str, endpoint: str, status: int | None = None):
        self.endpoint, self.status = endpoint, status
        super().__init__(f"Kafka Connect {endpoint}: {message}")


class ConnectUnreachable(ConnectError):
    exit_code = 3


class ConnectNotFound(ConnectError):
    pass


class ConnectConflict(ConnectError):
    pass


class ConnectRequestError(ConnectError):
    """4xx other than 404/409: the request itself is wrong (bad config, unknown plugin)."""


class ConnectServerError(ConnectError):
    pass


@dataclass
class TaskState:
    id: int
    state: str
    worker_id: str
    trace: str | None = None


@dataclass
class ConnectorStatus:
    name: str
    state: str
    worker_id: str
    tasks: list[TaskState]
    trace: str | None = None

    @property
    def healthy(self) -> bool:
        return self.state == "RUNNING" and bool(self.tasks) and all(t.state == "RUNNING" for t in self.tasks)

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> "ConnectorStatus":
        conn = body.get("connector", {})
        tasks = [TaskState(t["id"], t["state"], t.get("worker_id", ""), t.get("trace")) for t in body.get("tasks", [])]
        return cls(body["name"], conn.get("state", "UNKNOWN"), conn.get("worker_id", ""), tasks, conn.get("trace"))


class ConnectClient:
    def __init__(self, url: str, timeout_s: float = 10.0, conflict_retries: int = 8,
                 session: requests.Session | None = None):
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.conflict_retries = conflict_retries
        self._http = session or requests.Session()

    def _request(self, method: str, path: str, json: Any = None, params: dict | None = None) -> Any:
        return retried(self._request_once, method, path, json, params, retries=self.conflict_retries,
                       retry_on=(ConnectConflict,), first=0.25, cap=4.0)

    def _request_once(self, method: str, path: str, json: Any, params: dict | None) -> Any:
        endpoint = f"{self.url}{path}"
        try:
            resp = self._http.request(method, endpoint, json=json, params=params, timeout=self.timeout_s,
                                      headers={"Accept": "application/json"})
        except requests.Timeout:
            raise ConnectUnreachable(f"no answer within {self.timeout_s:g} s", endpoint) from None
        except requests.ConnectionError as exc:
            raise ConnectUnreachable(f"cannot connect ({type(exc).__name__})", endpoint) from None
        return self._result(resp, endpoint)

    @staticmethod
    def _result(resp: requests.Response, endpoint: str) -> Any:
        if resp.status_code < 400:
            return resp.json() if resp.content else None
        try:
            message = resp.json().get("message") or resp.text
        except ValueError:
            message = resp.text
        message = f"HTTP {resp.status_code}: {message.strip()[:500]}"
        kind = {404: ConnectNotFound, 409: ConnectConflict}.get(resp.status_code)
        if kind is None:
            kind = ConnectServerError if resp.status_code >= 500 else ConnectRequestError
        raise kind(message, endpoint, resp.status_code)

    # -- worker ---------------------------------------------------------------------------------
    def server_info(self) -> dict[str, Any]:
        return self._request("GET", "/")

    def plugins(self) -> list[dict[str, Any]]:
        return self._request("GET", "/connector-plugins")

    # -- connectors ----------------------------------------------------------------------------
    def list(self) -> list[str]:
        return self._request("GET", "/connectors")

    def get(self, name: str) -> dict[str, Any]:
        return self._request("GET", f"/connectors/{name}")

    def get_config(self, name: str) -> dict[str, str] | None:
        """The stored config, or None when the connector does not exist."""
        try:
            return self._request("GET", f"/connectors/{name}/config")
        except ConnectNotFound:
            return None

    def put_config(self, name: str, config: dict[str, str]) -> dict[str, Any]:
        """Create or update: PUT is idempotent, unlike POST /connectors."""
        return self._request("PUT", f"/connectors/{name}/config", json=config)

    def status(self, name: str) -> ConnectorStatus:
        return ConnectorStatus.from_json(self._request("GET", f"/connectors/{name}/status"))

    def pause(self, name: str) -> None:
        self._request("PUT", f"/connectors/{name}/pause")

    def resume(self, name: str) -> None:
        self._request("PUT", f"/connectors/{name}/resume")

    def stop(self, name: str) -> None:
        self._request("PUT", f"/connectors/{name}/stop")

    def restart(self, name: str, include_tasks: bool = True, only_failed: bool = False) -> Any:
        return self._request("POST", f"/connectors/{name}/restart",
                             params={"includeTasks": str(include_tasks).lower(),
                                     "onlyFailed": str(only_failed).lower()})

    def delete(self, name: str) -> None:
        self._request("DELETE", f"/connectors/{name}")

    def reset_offsets(self, name: str) -> None:
        """Forget where the connector was (it must be stopped): Debezium then snapshots again."""
        self._request("DELETE", f"/connectors/{name}/offsets")

    def offsets(self, name: str) -> dict[str, Any]:
        return self._request("GET", f"/connectors/{name}/offsets")

    def snapshot_committed(self, name: str) -> bool:
        """Debezium's committed source offsets say its snapshot is over: a WAL position (`lsn`)
        without the `snapshot` key every offset carries while one runs. False while Connect
        cannot answer. An offset without a position is not one: Debezium's notifications (the
        snapshot's "STARTED", written before its first row) commit `{"ts_usec": 0}`, which for
        about a second said "no snapshot running" and once ended a bootstrap's bulk at 283 of
        1,000,000 rows (benchmarks/bootstrap_1m.py)."""
        try:
            offsets = self.offsets(name).get("offsets") or []
        except Exception:  # noqa: BLE001 - Connect busy or restarting: ask again later
            return False
        return bool(offsets) and all("lsn" in (o.get("offset") or {}) and "snapshot" not in o["offset"]
                                     for o in offsets)

    def validate(self, plugin_class: str, config: dict[str, str]) -> list[str]:
        """Errors the plugin reports for this config, as 'field: message' lines (empty when valid)."""
        short = plugin_class.rsplit(".", 1)[-1]
        body = self._request("PUT", f"/connector-plugins/{short}/config/validate",
                             json={"connector.class": plugin_class, **config})
        errors = []
        for item in body.get("configs", []):
            value = item.get("value", {})
            for message in value.get("errors", []):
                errors.append(f"{value.get('name')}: {message}")
        return errors
