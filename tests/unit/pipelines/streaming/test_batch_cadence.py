"""The tables' batches spaced further apart under load (pipelines/streaming/batch_cadence.py)."""
import pytest

from pipelines.streaming.batch_cadence import BatchCadence


def cadence(**kw) -> BatchCadence:
    return BatchCadence(**{"trigger_s": 0.5, "under_load_s": 1.0, "load_rate": 1000, **kw})


def test_the_first_batch_never_waits():
    assert cadence().wait_after(records=50_000, started=10.0, now=10.2) == 0.0


def test_under_load_a_batch_returns_the_interval_under_load_after_it_began():
    """Spark starts the next batch as soon as one returns past its interval: returned 1 s after
    it began, the next begins 1 s after this one."""
    c = cadence()
    c.wait_after(1000, started=10.0, now=10.2)
    # 1,100 records since a start 0.54 s before: ~2,000/s
    assert c.wait_after(1100, started=10.54, now=10.74) == pytest.approx(0.8)


def test_few_changes_keep_the_triggers_interval():
    c = cadence()
    c.wait_after(100, started=10.0, now=10.1)
    assert c.wait_after(499, started=10.5, now=10.6) == 0.0   # 998/s: below the load rate
    assert c.wait_after(500, started=11.0, now=11.1) == pytest.approx(0.9)   # 1,000/s: at it


def test_a_batch_longer_than_the_interval_under_load_does_not_wait():
    c = cadence()
    c.wait_after(1000, started=10.0, now=10.2)
    assert c.wait_after(5000, started=10.5, now=11.6) == 0.0


def test_the_rate_is_over_the_time_since_the_previous_batch_began():
    """A spaced batch's successor holds what arrived while it ran and waited: 2,000 records one
    second after a batch that began 1 s before is 2,000/s, the load still on; 700 in that second
    is below it, and the next batch starts at the trigger's interval again."""
    c = cadence()
    c.wait_after(1000, started=10.0, now=10.1)
    assert c.wait_after(2000, started=11.0, now=11.1) > 0
    assert c.wait_after(700, started=12.0, now=12.1) == 0.0


def test_once_under_load_it_stays_until_the_rate_falls_well_below_the_load_rate():
    """At about the load rate the cadence would flip every batch (500 in 0.5 s is 1,000/s; the
    same rate over a spaced second, 950 records, is just below it): under load it holds until
    the rate is below 80 % of the load rate."""
    c = cadence()
    c.wait_after(100, started=10.0, now=10.1)
    assert c.wait_after(500, started=10.5, now=10.6) > 0
    assert c.wait_after(950, started=11.5, now=11.6) > 0      # 950/s: held
    assert c.wait_after(810, started=12.5, now=12.6) > 0      # 810/s: held
    assert c.wait_after(790, started=13.5, now=13.6) == 0.0   # 790/s: released
    assert c.wait_after(450, started=14.0, now=14.1) == 0.0   # 900/s: not yet under load again


@pytest.mark.parametrize("under_load_s", [0.5, 0.25])
def test_an_interval_under_load_not_above_the_trigger_never_waits(under_load_s):
    c = cadence(under_load_s=under_load_s)
    c.wait_after(1000, started=10.0, now=10.1)
    assert c.wait_after(100_000, started=10.5, now=10.6) == 0.0


def test_a_batch_filled_to_max_offsets_per_trigger_never_waits():
    """Capped batches are a backlog's: their rate is how fast the pipeline drains, and waiting
    would only slow it (a 1,000-record cap drained at 2,000/s would drop to ~900/s)."""
    c = cadence(max_records=1000)
    c.wait_after(1000, started=10.0, now=10.2)
    assert c.wait_after(950, started=10.5, now=10.7) == 0.0
    assert c.wait_after(700, started=11.0, now=11.2) > 0      # 1,400/s below the cap: the load's
