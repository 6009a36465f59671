"""A dead-letter sink for tests that expect none (the in-memory stores are derived/sinks/memory.py)."""
from __future__ import annotations


class NoLetters:
    def write(self, letters):
        assert not letters, [x.reason for x in letters]
        return 0
