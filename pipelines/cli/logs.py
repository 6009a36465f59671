"""One logging setup for every command: cdckit's lines with time, level and component on stderr
(or one JSON object per line with `--log-format json`), tracebacks only with `--debug`. Spark logs
at ERROR into its own file (pipelines/spark/session.py) and py4j not at all, unless `--verbose`:
the failures they log reach cdckit as exceptions, reported in one line. Secret values are masked."""
from __future__ import annotations

import json
import logging
import sys
import time
from dataclasses import dataclass

GLOBAL_FLAGS = ("--verbose", "--debug")
GLOBAL_OPTIONS = ("--log-format",)


@dataclass
class LogSettings:
    verbose: bool = False
    debug: bool = False
    fmt: str = "text"


SETTINGS = LogSettings()


def hoist_global_options(argv: list[str]) -> list[str]:
    """`cdckit run --debug` and `cdckit --debug run` alike: the global options move in front of the
    command, where click's group takes them (nothing after `--` is touched)."""
    front, rest, i = [], [], 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest.extend(argv[i:])
            break
        if arg in GLOBAL_FLAGS or any(arg.startswith(f"{o}=") for o in GLOBAL_OPTIONS):
            front.append(arg)
        elif arg in GLOBAL_OPTIONS and i + 1 < len(argv):
            front.extend(argv[i:i + 2])
            i += 1
        else:
            rest.append(arg)
        i += 1
    return front + rest


def component(name: str) -> str:
    return name[len("cdckit."):] if name.startswith("cdckit.") else name


class TextFormatter(logging.Formatter):
    def __init__(self, tracebacks: bool):
        super().__init__("%(asctime)s %(levelname)s %(component)s: %(message)s")
        self.tracebacks = tracebacks

    def format(self, record: logging.LogRecord) -> str:
        record.component = component(record.name)
        if not self.tracebacks and record.exc_info:
            exc = record.exc_info[1]
            record = logging.makeLogRecord({**record.__dict__, "exc_info": None, "exc_text": None,
                                            "msg": f"{record.getMessage()}: {type(exc).__name__}: {exc}",
                                            "args": ()})
            record.component = component(record.name)
        return super().format(record)


class JsonFormatter(logging.Formatter):
    def __init__(self, tracebacks: bool):
        super().__init__()
        self.tracebacks = tracebacks

    def format(self, record: logging.LogRecord) -> str:
        body = {"ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
                + f".{int(record.msecs):03d}Z", "level": record.levelname, "component": component(record.name),
                "message": record.getMessage()}
        if record.exc_info:
            exc = record.exc_info[1]
            body["error"] = f"{type(exc).__name__}: {exc}"
            if self.tracebacks:
                body["trace"] = self.formatException(record.exc_info)
        return json.dumps(body)


class CurrentStderr(logging.StreamHandler):
    """Writes to whatever sys.stderr is at the time: a live progress display (rich) replaces it to
    print log lines above its bars."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


def setup(verbose: bool = False, debug: bool = False, fmt: str = "text") -> None:
    from pipelines.secrets import install_log_masking
    from pipelines.spark.session import set_verbose

    SETTINGS.verbose, SETTINGS.debug, SETTINGS.fmt = verbose, debug, fmt
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = CurrentStderr()
    handler.setFormatter(JsonFormatter(debug) if fmt == "json" else TextFormatter(debug))
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger("cdckit").setLevel(logging.DEBUG if debug else logging.INFO)
    # py4j logs, at ERROR and with Java traces, every failure that cdckit reports itself in one line.
    for noisy in ("py4j", "pyspark"):
        logging.getLogger(noisy).setLevel(logging.INFO if verbose else logging.CRITICAL)
    for noisy in ("urllib3", "elastic_transport", "opensearch", "kafka"):
        logging.getLogger(noisy).setLevel(logging.INFO if verbose else logging.ERROR)
    set_verbose(verbose)
    install_log_masking()
