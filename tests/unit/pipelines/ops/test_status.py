"""`cdckit status`'s pure parts: whether a topic's lag is growing."""
from pipelines.ops.status import lag_growing


def test_a_lag_that_grew_while_the_pipeline_reached_the_first_samples_ends_is_not_growing():
    """Steady load, a commit just before the first sample and the next one before the second: more
    lag (the writes since), but everything the topic held at the first sample is applied."""
    assert not lag_growing(100, 1900, {"0": 5000, "1": 5100}, {"0": 4950, "1": 5050}, {"0": 5000, "1": 5200})


def test_a_lag_that_grew_while_the_pipeline_stayed_short_of_the_first_samples_ends_is_growing():
    assert lag_growing(100, 1900, {"0": 5000, "1": 5100}, {"0": 4000, "1": 4000}, {"0": 4999, "1": 5200})


def test_a_lag_that_grew_with_nothing_committed_between_the_samples_is_growing():
    """A stopped job while writes go on, even when the first sample's ends were already applied."""
    assert lag_growing(0, 10, {"0": 5000}, {"0": 5000}, {"0": 5000})
    assert lag_growing(0, 10, {"0": 5000}, {}, {})


def test_a_lag_that_did_not_grow_is_not_growing():
    assert not lag_growing(1900, 100, {"0": 5000}, {"0": 10}, {"0": 10})
    assert not lag_growing(50, 50, {"0": 5000}, {}, {})
