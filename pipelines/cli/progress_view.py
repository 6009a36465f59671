"""Progress of long work: rich bars on a terminal; where the output is not one (a log file, a
pipe), a plain log line per task every few seconds and one when it completes, so a log reads as
a story instead of holding carriage-return redraws."""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

log = logging.getLogger("cdckit.progress")


@dataclass
class _Task:
    name: str
    total: int
    unit: str
    completed: int = 0
    started: float = field(default_factory=time.monotonic)
    said_at: float = 0.0
    said_completed: int = -1
    said: tuple = ()


class ProgressView:
    def __init__(self, console, every_s: float = 10.0, bars: bool | None = None):
        self.console, self.every_s = console, every_s
        self.bars = console.is_terminal if bars is None else bars
        self.tasks: dict[str, _Task] = {}
        self._progress = None
        self._ids: dict[str, int] = {}
        if self.bars:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            self._progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                      TextColumn("{task.completed:,.0f}/{task.total:,.0f}"),
                                      TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                                      console=console, transient=False)

    def __enter__(self) -> "ProgressView":
        if self._progress is not None:
            self._progress.__enter__()
        return self

    def __exit__(self, *exc):
        if self._progress is not None:
            return self._progress.__exit__(*exc)
        return None

    def add(self, name: str, total: int, unit: str = "records") -> None:
        self.tasks[name] = _Task(name, max(total, 0), unit)
        if self._progress is not None:
            self._ids[name] = self._progress.add_task(name, total=max(total, 1), rate="")

    def set_total(self, name: str, total: int) -> None:
        self.tasks[name].total = max(total, 0)
        if self._progress is not None:
            self._progress.update(self._ids[name], total=max(total, 1))

    def update(self, name: str, completed: int, description: str | None = None) -> None:
        task = self.tasks[name]
        task.completed = completed
        rate = completed / max(time.monotonic() - task.started, 1e-6)
        if self._progress is not None:
            self._progress.update(self._ids[name], completed=min(completed, max(task.total, 1)),
                                  description=description or name, rate=f"{rate:,.0f} {task.unit}/s")
            return
        now = time.monotonic()
        said = (completed, description)
        finishing = task.total and completed >= task.total and task.said_completed < task.total
        if said != task.said and (finishing or now - task.said_at >= self.every_s):
            task.said_at, task.said_completed, task.said = now, completed, said
            log.info(self.line(task, rate, description))

    def finish(self, name: str) -> None:
        task = self.tasks[name]
        self.update(name, max(task.completed, task.total))

    def phase(self, text: str) -> None:
        """A line between the bars (a rebuild's phases)."""
        if self._progress is not None:
            self._progress.console.print(text, markup=False, highlight=False)
        else:
            log.info(text)

    @staticmethod
    def line(task: _Task, rate: float, description: str | None = None) -> str:
        text = f"{description or task.name}: {task.completed:,}"
        if task.total:
            text += f"/{task.total:,} {task.unit} ({100 * min(task.completed, task.total) / task.total:.0f} %)"
            left = task.total - task.completed
            if rate > 0:
                text += f", {rate:,.0f} {task.unit}/s" + (f", about {left / rate:,.0f} s left" if left > 0 else "")
        else:
            text += f" {task.unit}"
        return text
