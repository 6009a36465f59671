"""`cdckit status --watch`: one frame from a canned scrape, the plain lines off a terminal, Ctrl-C."""
import io

from rich.console import Console

from pipelines.cli import status_watch
from pipelines.ops import watch_view as w
from tests.unit.pipelines.ops.test_watch_view import SCRAPE, TOPICS


def test_one_frame_from_a_canned_scrape():
    cur = w.parse_scrape(SCRAPE, at=2.0)
    prev = w.parse_scrape(SCRAPE.replace('} 1000.0\ncdckit_table_records_total', '} 800.0\ncdckit_table_records_total'),
                          at=0.0)
    fetched = w.Fetched(counts={"public.customers": {"search_docs": 990, "cache_keys": 991}},
                        kafka_lag={"public.orders": 4}, problems=["redis at redis://h:6379/0: ConnectionError"])
    view = w.build_view(cur, prev, TOPICS, fetched, now=1002.5)
    console = Console(record=True, width=140, force_terminal=False)
    console.print(status_watch.frame(view, "http://127.0.0.1:9464/metrics"))
    text = console.export_text()
    lines = text.splitlines()
    assert "http://127.0.0.1:9464/metrics: last batch 2.5 s ago" in lines[0]
    row = next(line for line in lines if "public.customers" in line and "│" in line)
    assert [c.strip() for c in row.strip("│ ").split("│")] == ["public.customers", "100.0", "12", "0.8 s", "2",
                                                              "990", "991"]
    row = next(line for line in lines if "public.orders" in line and "│" in line)
    assert [c.strip() for c in row.strip("│ ").split("│")] == ["public.orders", "0.0", "4", "-", "0", "-", "-"]
    assert "connector RUNNING (1 RUNNING)  |  slot active, lag 2.0 kB, retained ?" in text
    assert "snapshot public.customers 250/1,000 25%" in text
    assert "warning: redis at redis://h:6379/0: ConnectionError" in text


class FakeFeed:
    topics = TOPICS

    def __init__(self, scrapes):
        self.scrapes = list(scrapes)

    def sample(self):
        if not self.scrapes:
            raise KeyboardInterrupt
        text = self.scrapes.pop(0)
        if text is None:
            return None, w.Fetched(error="metrics endpoint http://h/metrics does not answer (ConnectionError); "
                                         "retrying")
        return w.parse_scrape(text, at=len(self.scrapes)), w.Fetched()


def test_off_a_terminal_one_plain_line_per_refresh_and_ctrl_c_exits_0():
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=False, soft_wrap=True)
    code = status_watch.watch(FakeFeed([SCRAPE, None, SCRAPE]), console, 0.0, "http://h/metrics")
    assert code == 0
    lines = buf.getvalue().splitlines()
    assert len(lines) == 3
    assert "public.customers - ev/s lag 12" in lines[0] and "connector RUNNING" in lines[0]
    assert "does not answer" in lines[1]
    assert "snapshot public.customers 250/1,000 25%" in lines[2]


def test_on_a_terminal_the_live_view_runs_until_ctrl_c():
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=140)
    assert status_watch.watch(FakeFeed([SCRAPE, None]), console, 0.0, "http://h/metrics") == 0
    assert "public.customers" in buf.getvalue()


def test_the_command_watches_a_silent_endpoint_and_stops_cleanly_on_ctrl_c(tmp_path):
    """The real entry point, stdout a pipe, nothing answering: plain lines saying so, then exit 0 on
    SIGINT, no traceback, no secret."""
    import os
    import signal
    import subprocess
    import sys

    from tests.support.configs import with_
    from tests.support.integration import ROOT, write_config

    secret = "Sup3r-S3cret-Pa55"
    data = with_("redis.url", "redis://127.0.0.1:9/0")
    data["search"]["url"] = "http://127.0.0.1:9"
    data["connect"]["url"] = "http://127.0.0.1:9"
    data["kafka"]["bootstrap_servers"] = "127.0.0.1:9"
    data["postgres"].update(port=9, password={"env": "CDCKIT_PW"})
    data["spark"] = {"checkpoint_dir": str(tmp_path / "ckpt")}
    path = write_config(tmp_path, data)
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "status", "--watch", "--interval", "0.3",
                             "--metrics-url", "http://user:pw@127.0.0.1:9/metrics", "-c", str(path)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "CDCKIT_PW": secret})
    # Two lines seen: the watch loop runs, its Ctrl-C handling in place (a fixed wait once sent
    # SIGINT to a command still importing on a busy machine: exit 130).
    import threading

    seen = []
    silent = threading.Timer(120, proc.kill)   # a command that prints nothing fails, never hangs the run
    silent.start()
    while len(seen) < 2 and proc.poll() is None:
        seen.append(proc.stdout.readline())
    silent.cancel()
    proc.send_signal(signal.SIGINT)
    rest, stderr = proc.communicate(timeout=30)
    stdout = "".join(seen) + rest
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert "metrics endpoint http://127.0.0.1:9/metrics does not answer" in stdout
    assert len(stdout.splitlines()) >= 2  # it kept retrying
    assert secret not in stdout + stderr and "user:pw" not in stdout + stderr


def test_watch_refuses_json_and_a_config_without_metrics(tmp_path):
    from tests.support.configs import BASE
    from tests.support.integration import cli, write_config

    path = write_config(tmp_path, {**BASE, "metrics_port": 0})
    assert cli("status", "--watch", "--json", "-c", str(path)).returncode == 2
    result = cli("status", "--watch", "-c", str(path))
    assert result.returncode == 2 and "--metrics-url" in result.stderr
