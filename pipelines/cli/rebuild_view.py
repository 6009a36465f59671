"""What `cdckit rebuild` shows: the plan as a table, and progress bars fed by the Spark tasks."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table

from pipelines.secrets import print_masked


def show_plan(out: Console, plan, notes: list[str]) -> None:
    action = f"resuming rebuild {plan.rebuild_id} at phase '{plan.resumed_phase}'" if plan.resumed_phase \
        else f"rebuild {plan.rebuild_id}"
    print_masked(out, f"{action}: {', '.join(plan.stores)}; {plan.records:,} records from {len(plan.topics)} topic(s), "
                      f"estimated {plan.estimate_s:,.0f} s")
    table = Table("topic", "partition", "from offset", "to offset")
    for topic, parts in plan.end.items():
        for p, end in parts.items():
            table.add_row(topic, p, str(plan.begin.get(topic, {}).get(p, 0)), str(end))
    out.print(table)
    for name, s in plan.search.items():
        print_masked(out, f"search {name}: alias {s['alias']} {s['current'] or '(none)'} -> {s['target']}")
    if plan.cache:
        print_masked(out, f"cache: fill database {plan.cache['spare_db']}, then SWAPDB with {plan.cache['live_db']}")
    if plan.documents:
        print_masked(out, f"documents: built anew from the earliest offsets into state {plan.documents['folder']}, "
                          "which the running job takes over at the switch")
    for note in notes:
        print_masked(out, f"note: {note}")


class RebuildProgress:
    """Progress: a bar per partition for the bulk replay (read, then written) on a terminal, plain
    lines elsewhere (pipelines/cli/progress_view.py); a line per phase."""

    def __init__(self, plan, console):
        from pipelines.cli.progress_view import ProgressView

        self.plan = plan
        self.view = ProgressView(console)

    def __enter__(self):
        self.view.__enter__()
        for topic, parts in self.plan.end.items():
            for p, end in parts.items():
                total = max(int(end) - int(self.plan.begin.get(topic, {}).get(p, 0)), 1)
                self.view.add(f"{topic}-{p}", total)
        return self

    def __exit__(self, *exc):
        return self.view.__exit__(*exc)

    def callbacks(self):
        from pipelines.rebuild.phases import Callbacks

        def bulk(progress: dict) -> None:
            for name, p in progress.items():
                if name in self.view.tasks:
                    applied = f" ({p.get('applied', 0):,}/{p.get('survivors', 0):,} keys written)" \
                        if p.get("applied") else ""
                    self.view.update(name, p.get("read", 0), description=f"replay {name}{applied}")

        return Callbacks(phase=self.view.phase, bulk_progress=bulk)
