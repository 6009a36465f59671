"""`cdckit connector apply|status|pause|resume|stop|restart|delete`."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from pipelines.cli.base import app, config_option, json_option, load, say


@app.group("connector")
def connector_group() -> None:
    """Manage the Debezium connector over Kafka Connect's REST API."""


@connector_group.command("apply")
@config_option
def connector_apply(config_path: Path) -> None:
    """Create or update the connector; changes nothing when it is already right."""
    from pipelines.ops import connector_admin

    cfg = load(config_path)
    result = connector_admin.apply(cfg)
    say(f"connector {cfg.connector_name}: {result.action}")
    for key, old, new in result.changes:
        if old is not None:
            say(f"  - {key}={old}")
        if new is not None:
            say(f"  + {key}={new}")


@connector_group.command("status")
@config_option
@json_option
def connector_status(config_path: Path, as_json: bool) -> None:
    """Connector and task states, with the trace of any failed task. Exit 1 unless all run."""
    from pipelines.ops import connector_admin

    cfg = load(config_path)
    st = connector_admin.status(cfg)
    if as_json:
        body = None if st is None else {"name": st.name, "state": st.state, "worker_id": st.worker_id,
                                        "trace": st.trace, "tasks": [vars(t) for t in st.tasks]}
        say(json.dumps(body, indent=2))
    elif st is None:
        say(f"connector {cfg.connector_name}: not registered (run `cdckit connector apply`)")
    else:
        say(f"connector {st.name}: {st.state} on {st.worker_id}")
        if st.trace:
            say(st.trace)
        for task in st.tasks:
            say(f"  task {task.id}: {task.state} on {task.worker_id}")
            if task.trace:
                say("    " + task.trace.replace("\n", "\n    "))
    sys.exit(0 if st is not None and st.healthy else 1)


def _connector_verb(verb: str, done: str):
    @connector_group.command(verb, help=f"{verb.capitalize()} the connector (with its tasks).")
    @config_option
    def command(config_path: Path) -> None:
        from pipelines.ops import connector_admin

        cfg = load(config_path)
        getattr(connector_admin.client_for(cfg), verb)(cfg.connector_name)
        say(f"connector {cfg.connector_name}: {done}")

    return command


for _verb, _done in (("pause", "pause requested"), ("resume", "resume requested"), ("stop", "stop requested"),
                     ("restart", "restart requested"), ("delete", "deleted")):
    _connector_verb(_verb, _done)
