"""A foreachBatch function interrupted by its query's stop, raised in a form Spark can classify.

When a query stops while its foreachBatch function waits on a Spark job, the JVM call is
interrupted and Python gets a Py4JJavaError whose text holds the Java stack trace. Spark then
decides whether the stop or a failure ended the query by matching that text (the Python traceback,
several KB) against `An error occurred while calling((.|\\r\\n|\\r|\\n)*)(java.lang.InterruptedException|...)`
(StreamExecution.PROXY_ERROR): the regex recurses once per character, so on a long traceback the
stream execution thread overflows its stack: a 1,000-line StackOverflowError in the Spark log as the
query stops, the thread ending on that error. Raised again as one short line that still matches,
the stop is classified as a stop and the log stays quiet. Any other long error is raised without
its stack frames (JavaCallFailed).
"""
from __future__ import annotations

import functools
import logging
import re
from typing import Any, Callable

log = logging.getLogger("cdckit.spark")

# The JVM's interruptions Spark's StreamExecution takes for a stop (IO_EXCEPTION_NAMES).
INTERRUPTIONS = ("java.lang.InterruptedException", "java.io.InterruptedIOException",
                 "java.nio.channels.ClosedByInterruptException")
OWN_PACKAGES = ("connectors", "derived", "pipelines")
_CALL = re.compile(r"An error occurred while calling ([\w$]+(?:\.[\w$]+)*)")


class QueryInterrupted(Exception):
    """A foreachBatch function's Spark job interrupted (the query stopping), in one short line."""


class JavaCallFailed(Exception):
    """A foreachBatch function's JVM call failed: the error's message without its stack frames."""


# Spark matches its regex over the whole text only while the query stops, but then over any error:
# a failure that races the stop (a job cancelled under it, a Python task killed) overflowed the stack
# just the same. Without the frames the text keeps what says what happened (every exception's line,
# the causes, cdckit's own errors a task raised), a few hundred characters.
MAX_CHARS = 2_000
_JAVA_FRAME = re.compile(r"^\s+at [\w$.<>/]+\(|^\s*\.\.\. \d+ more$")
_OURS_LINE = re.compile(rf"^(?:{'|'.join(OWN_PACKAGES)})\.[\w.]+: ")


def without_frames(text: str) -> str:
    """`text` (a Py4J error: the Java trace, maybe a Python worker's traceback inside) without the
    Java and Python stack frames; past MAX_CHARS, its start and end with cdckit's own errors' lines."""
    lines, code = [], False
    for line in text.splitlines():
        if _JAVA_FRAME.match(line):
            continue
        if line.startswith('  File "'):
            code = True   # a Python frame: its line, then its source and caret lines
            continue
        if code and (line.startswith("    ") or not line.strip()):
            continue
        code = False
        lines.append(line)
    out = "\n".join(lines)
    if len(out) <= MAX_CHARS:
        return out
    ours = [line for line in lines if _OURS_LINE.match(line)][-3:]
    return "\n".join([out[:500], "[...]", *ours, "[...]", out[-(MAX_CHARS - 800):]])


def interruption_line(exc: BaseException) -> str | None:
    """The one line Spark recognizes as a stop's interruption, when `exc` (or an exception it was raised
    from) is a JVM call interrupted by one; else None."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        text = str(exc)
        call = _CALL.search(text)
        name = next((n for n in INTERRUPTIONS if n in text), None)
        if call and name:
            return f"py4j.protocol.Py4JJavaError: An error occurred while calling {call.group(1)}: {name}"
        exc = exc.__cause__ or exc.__context__
    return None


def stopped_on_purpose(message: str) -> str:
    """`message` of an error a foreachBatch function raises because its query is stopping (not
    interrupted: it saw the stop coming), with the words that make Spark count it as the stop,
    not as a failure logged at ERROR."""
    return f"{message} (py4j.protocol.Py4JJavaError: An error occurred while calling foreachBatch: {INTERRUPTIONS[0]})"


def compact_interruptions(fn: Callable[[Any, int], Any]) -> Callable[[Any, int], Any]:
    """`fn` (a foreachBatch function) whose interruption by the query's stop is raised as one line."""

    @functools.wraps(fn)
    def run(df, batch_id: int):
        try:
            return fn(df, batch_id)
        except Exception as exc:
            # cdckit's own errors keep their type (a store unavailable pauses the restart, etc.).
            ours = type(exc).__module__.split(".")[0] in OWN_PACKAGES
            line = None if ours else interruption_line(exc)
            if line is not None:
                log.debug("batch %s interrupted: %s", batch_id, exc)
                raise QueryInterrupted(line) from None
            text = str(exc)
            if ours or len(text) <= MAX_CHARS:
                raise
            log.debug("batch %s failed: %s", batch_id, text)   # (the frames, with --verbose)
            raise JavaCallFailed(f"{type(exc).__name__}: {without_frames(text)}") from None

    return run
