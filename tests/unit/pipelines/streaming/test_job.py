"""The job's wiring that needs no Spark: the JVM kafka source switch takes the same options."""
from types import SimpleNamespace

from pipelines.config import parse_config
from pipelines.streaming.job import change_stream
from tests.support.configs import with_


class FakeReader:
    def __init__(self):
        self.fmt, self.options = None, {}

    def format(self, fmt):
        self.fmt = fmt
        return self

    def option(self, key, value):
        self.options[key] = value
        return self

    def load(self):
        return self


class FakeSpark:
    def __init__(self):
        self.readStream = FakeReader()
        self.sparkContext = SimpleNamespace(defaultParallelism=2)


def test_python_and_jvm_sources_get_the_same_options(tmp_path):
    # A checkpoint of its own: the working directory's (the quickstart's) may hold a bootstrap's hand-over.
    ckpt = str(tmp_path / "ckpt")
    python = change_stream(FakeSpark(), parse_config(with_("spark", {"max_offsets_per_trigger": 1000,
                                                                     "checkpoint_dir": ckpt})))
    jvm = change_stream(FakeSpark(), parse_config(with_("spark", {"max_offsets_per_trigger": 1000,
                                                                  "kafka_source": "jvm", "checkpoint_dir": ckpt})))
    assert (python.fmt, jvm.fmt) == ("cdckit_kafka", "kafka")
    assert python.options["subscribePattern"] == parse_config(with_("spark", {})).topic_pattern
    assert python.options["kafka.bootstrap.servers"] == "127.0.0.1:9092"
    assert python.options["maxOffsetsPerTrigger"] == "1000"
    assert {k: v for k, v in jvm.options.items() if k != "failOnDataLoss"} == {
        k: v for k, v in python.options.items() if k not in ("ranges", "tasks", "kafka.log_level")}  # librdkafka's
    assert jvm.options["failOnDataLoss"] == "true" and python.options["ranges"] == "true"
    assert python.options["tasks"] == "2"  # one apply task per core and micro-batch


def test_progress_lag_from_spark_progress():
    from pipelines.streaming.job import progress_lag

    progress = {"sources": [{"endOffset": '{"t": {"0": 5, "1": 7}}', "latestOffset": '{"t": {"0": 9, "1": 7}}'}]}
    assert progress_lag(progress) == {"t": 4}
    assert progress_lag(None) == {}
    assert progress_lag({"sources": [{"endOffset": "null", "latestOffset": None}]}) == {}


def test_one_line_per_batch_says_what_it_did():
    import time

    from pipelines.apply.stats import BatchStats
    from pipelines.streaming.job import batch_line

    stats = BatchStats(records=1200, search_applied=1000, search_stale=200, cache_applied=990, cache_stale=210,
                       dead_letters=2, newest_source_ts_ms=int((time.time() - 1.5) * 1000))
    line = batch_line(12, stats, 0.42, {"a": 5, "b": 7})
    assert line.startswith("batch 12: 1,200 records, search 1,000 applied/200 stale, cache 990 applied/210 stale, "
                           "2 DEAD LETTERS (`cdckit dlq list`), lag 12, freshness 1.")
    assert line.endswith(", 0.42 s")
    assert "freshness" not in batch_line(13, BatchStats(records=1), 0.1, None)
    # A store left out of `sinks` is not named in the line.
    only_search = batch_line(14, stats, 0.1, None, ["search"])
    assert "search 1,000 applied" in only_search and "cache" not in only_search


def test_an_unread_catalog_holds_the_batch_only_under_stop():
    """`stop` promises no batch of a new shape: a schema check that could not read the catalog
    fails the batch (restartable); under the other policies the batch goes on, the next checks."""
    import pytest

    from derived.sinks.store_errors import StoreUnavailable
    from pipelines.config import parse_config
    from pipelines.streaming.job import _check_schema
    from tests.support.configs import BASE, with_

    class Down:
        def check(self, config):
            raise OSError("connection refused")

    stop = parse_config(with_("tables", [{**BASE["tables"][0], "on_schema_change": "stop"}]))
    with pytest.raises(StoreUnavailable, match="did not read the catalog"):
        _check_schema(Down(), stop)
    _check_schema(Down(), parse_config(BASE))


def test_the_restart_pause_grows_while_restarts_fail_at_once_and_starts_short_after_batches(monkeypatch, tmp_path):
    """Restarts that fail before any batch double the pause (to 60 s); a run that applied batches
    before it failed is a new outage: its pause starts at RESTART_PAUSE_S again."""
    from types import SimpleNamespace

    from pipelines.stopping import StopRequest
    from pipelines.streaming import job

    runs = iter([False, False, False, True, False, None])   # did the run apply a batch? None: it ends cleanly
    pauses = []

    class Query:
        def __init__(self, failed):
            self.failed = failed
        isActive = False

        def exception(self):
            return None if self.failed is None else "StoreUnavailable: redis went away"

        def stop(self):
            pass

    def start(spark, config, on_batch=None, config_path=None, metrics=None, gate=None, written=None):
        batched = next(runs)
        if batched:
            gate.begin(7)
            gate.end(7)
        return Query(batched)

    monkeypatch.setattr(job, "start", start)
    monkeypatch.setattr(job, "committed_batch", lambda _: None)
    monkeypatch.setattr(job.restart_pause, "readiness", lambda config, text: None)
    monkeypatch.setattr(job.restart_pause, "pause", lambda stop, seconds, ready: pauses.append(seconds) or False)
    config = SimpleNamespace(spark=SimpleNamespace(checkpoint_dir=tmp_path))
    assert job._run_queries(SimpleNamespace(stop=lambda: None), config, None, None, None, StopRequest(), None) == 0
    assert pauses == [5.0, 10.0, 20.0, 5.0, 10.0]



def test_a_query_whose_python_worker_missed_sparks_10_s_is_started_again_a_few_times(monkeypatch, tmp_path):
    """Spark's fixed 10 s wait for a Python worker (a Python source's runner) to connect back: on
    overloaded cores a start fails on it and is restarted; a Python that never starts fails the
    same way every time, so four in a row end the run with the error."""
    import pytest

    from pipelines.errors import CdckitError
    from pipelines.stopping import StopRequest
    from pipelines.streaming import job

    slow = ("org.apache.spark.SparkException: Python worker failed to connect back.\n"
            "Caused by: java.net.SocketTimeoutException: Timed out while waiting for the Python worker to connect back")

    class Query:
        isActive = False

        def __init__(self, failure):
            self.failure = failure

        def exception(self):
            return self.failure

        def stop(self):
            pass

    def runs(failures):
        outcomes = iter(failures)
        pauses = []
        monkeypatch.setattr(job, "start", lambda *a, **k: Query(next(outcomes)))
        monkeypatch.setattr(job.restart_pause, "pause", lambda stop, seconds, ready: pauses.append(seconds) or False)
        return pauses

    monkeypatch.setattr(job, "committed_batch", lambda _: None)
    config = SimpleNamespace(spark=SimpleNamespace(checkpoint_dir=tmp_path))
    pauses = runs([slow, slow, slow, None])
    assert job._run_queries(SimpleNamespace(stop=lambda: None), config, None, None, None, StopRequest(), None) == 0
    assert pauses == [5.0, 10.0, 20.0]
    runs([slow] * 4)
    with pytest.raises(CdckitError, match="connect back"):
        job._run_queries(SimpleNamespace(stop=lambda: None), config, None, None, None, StopRequest(), None)
    runs(["java.lang.IllegalStateException: something else"])   # anything else is not retried
    with pytest.raises(CdckitError):
        job._run_queries(SimpleNamespace(stop=lambda: None), config, None, None, None, StopRequest(), None)

    # The source's planning starts a worker in start() itself: that failure is started again too.
    outcomes = iter([RuntimeError(slow), None])

    def start(*a, **k):
        failure = next(outcomes)
        if failure is not None:
            raise failure
        return Query(None)

    monkeypatch.setattr(job, "start", start)
    assert job._run_queries(SimpleNamespace(stop=lambda: None), config, None, None, None, StopRequest(), None) == 0
    monkeypatch.setattr(job, "start", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("bad config")))
    with pytest.raises(RuntimeError, match="bad config"):
        job._run_queries(SimpleNamespace(stop=lambda: None), config, None, None, None, StopRequest(), None)


def test_the_batch_cadence_follows_the_config():
    from pipelines.streaming.job import batch_cadence

    def cadence(**spark):
        return batch_cadence(parse_config(with_("spark", spark)))

    c = cadence()   # the defaults: 500 ms, 1 s under load from 1,000 changes/s
    assert (c.trigger_s, c.under_load_s, c.load_rate) == (0.5, 1.0, 1000)
    c = cadence(trigger="2 s", trigger_under_load="5 s", load_rate=50)
    assert (c.trigger_s, c.under_load_s, c.load_rate) == (2.0, 5.0, 50)
    assert cadence(trigger_under_load=None) is None
    assert cadence(trigger="available_now") is None
    assert cadence(trigger="2 s") is None   # 1 s under load is not above it


def test_a_batch_under_load_waits_in_flight_and_a_stop_cuts_the_wait_short():
    import threading
    import time

    from pipelines.streaming.batch_cadence import BatchCadence
    from pipelines.streaming.job import BatchGate, gated_batch

    gate = BatchGate()
    cadence = BatchCadence(0.5, 1.0, 1000)
    applied = SimpleNamespace(records=0)
    gated_batch(gate, cadence, 1, lambda: applied)   # the first: no rate yet, no wait
    assert gate.last == 1 and gate.idle.is_set()

    time.sleep(0.1)
    seen_in_flight = []
    looked = threading.Timer(0.3, lambda: seen_in_flight.append(not gate.idle.is_set()))
    looked.start()
    t = time.monotonic()
    gated_batch(gate, cadence, 2, lambda: SimpleNamespace(records=5000))   # 5,000 in 0.1 s: under load
    looked.join()
    assert 0.9 < time.monotonic() - t < 3 and seen_in_flight == [True] and gate.last == 2

    hurry = threading.Timer(0.1, gate.hurry.set)   # what a stop does
    hurry.start()
    t = time.monotonic()
    gated_batch(gate, cadence, 3, lambda: SimpleNamespace(records=5000))
    assert time.monotonic() - t < 0.8 and gate.last == 3
    hurry.join()

    gate.hurry.clear()
    t = time.monotonic()
    gated_batch(gate, None, 4, lambda: SimpleNamespace(records=5000))   # no cadence: never waits
    assert time.monotonic() - t < 0.5


def test_a_stop_that_interrupts_the_next_batch_under_load_is_a_clean_stop(monkeypatch, tmp_path):
    """Under load a batch returns past its trigger and Spark plans the next at once, so the stop
    can interrupt that one in a way Spark does not count as a stop: once the last applied batch is
    committed, that failure is the stop's, not an error (the interrupted batch runs again)."""
    from pipelines.stopping import StopRequest
    from pipelines.streaming import job

    class Query:
        isActive = True
        lastProgress = None

        def exception(self):
            return None if self.isActive else "py4j.protocol.Py4JError: An error occurred (interrupted)"

        def stop(self):
            self.isActive = False

        def awaitTermination(self, timeout):  # noqa: N802
            pass

    def start(spark, config, on_batch=None, config_path=None, metrics=None, gate=None, written=None):
        gate.begin(7)
        gate.end(7)
        return Query()

    committed = {"yes": True}
    monkeypatch.setattr(job, "start", start)
    monkeypatch.setattr(job, "committed_batch", lambda _: 7 if committed["yes"] else 6)
    monkeypatch.setattr(job, "batch_committed", lambda ckpt, batch: committed["yes"])
    monkeypatch.setattr(job, "COMMIT_WAIT_S", 0.1)
    config = SimpleNamespace(spark=SimpleNamespace(checkpoint_dir=tmp_path))
    stop = StopRequest()
    stop.set()
    assert job._run_queries(SimpleNamespace(stop=lambda: None), config, None, None, None, stop, None) == 0

    committed["yes"] = False   # the stop came before the last batch's commit: a real failure, said
    import pytest

    from pipelines.errors import CdckitError
    with pytest.raises(CdckitError):
        job._run_queries(SimpleNamespace(stop=lambda: None), config, None, None, None, stop, None)


def test_a_stop_names_the_batch_the_checkpoint_recorded_and_one_applied_but_not_recorded():
    from pipelines.streaming.job import _stopped_after

    assert _stopped_after(None, None) == ""
    assert _stopped_after(None, 4) == " after batch 4"   # this run applied nothing: what an earlier one recorded
    assert _stopped_after(5, 5) == " after batch 5"
    assert _stopped_after(5, 4) == (" after batch 4 (batch 5 was applied but not yet recorded: the next start"
                                    " applies it again)")
    assert _stopped_after(0, None).startswith(" (batch 0 was applied")


def test_the_tables_query_starts_once_the_documents_source_has_asked_for_offsets():
    """Two Python streaming sources starting at once corrupt the environment map they share."""
    import time

    from pipelines.streaming.job import _await_sources_started

    class Query:
        isActive = True

        def __init__(self, messages):
            self.messages = messages

        @property
        def status(self):
            return {"message": self.messages.pop(0) if len(self.messages) > 1 else self.messages[0]}

    starting = Query(["Initializing StreamExecution", "Initializing sources", "Getting offsets from cdckit_kafka",
                      "Processing new data"])
    _await_sources_started(starting, timeout_s=5)
    assert starting.messages == ["Processing new data"]
    stuck = Query(["Initializing sources"])
    t = time.monotonic()
    _await_sources_started(stuck, timeout_s=0.3)   # bounded: a slow start does not hold the job
    assert 0.25 < time.monotonic() - t < 2
