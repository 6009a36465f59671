"""The one retry loop: a call tried again after growing pauses, then given up."""
from __future__ import annotations

import time
from typing import Callable, Iterator, TypeVar

T = TypeVar("T")


def pauses(retries: int, first: float, cap: float) -> Iterator[float]:
    """`retries` pauses in seconds, doubling from `first` up to `cap`."""
    delay = first
    for _ in range(retries):
        yield delay
        delay = min(delay * 2, cap)


def retried(call: Callable[..., T], *args, retries: int, retry_on: tuple[type[BaseException], ...],
            give_up: Callable[[BaseException], BaseException] | None = None, first: float = 0.2,
            cap: float = 8.0) -> T:
    """call(*args), again after each of `retries` pauses while it raises one of `retry_on`. The last
    failure is raised as give_up(exc) (chained), or as it is."""
    waits = pauses(retries, first, cap)
    while True:
        try:
            return call(*args)
        except retry_on as exc:
            pause = next(waits, None)
            if pause is None:
                if give_up is None:
                    raise
                raise give_up(exc) from exc
            time.sleep(pause)
