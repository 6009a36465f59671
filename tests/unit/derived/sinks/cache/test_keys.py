import pytest

from derived.sinks.cache.keys import adjacent_placeholders, render_key


def test_one_placeholder_is_written_as_it_is():
    assert render_key("customer:{id}", {"id": "a:b%c"}, "x") == "customer:a:b%c"
    assert render_key("n:{_id}", {}, "7") == "n:7"
    assert render_key("n:{id:05d}", {"id": 7}, "7") == "n:00007"


@pytest.mark.parametrize("a,b", [("x:y", "z"), ("x", "y:z"), ("x%3Ay", "z"), ("x:", "y:z"), ("", "x:y:z")])
def test_composite_values_never_slide_across_a_separator(a, b):
    keys = {render_key("order:{a}:{b}", {"a": a2, "b": b2}, "")
            for a2, b2 in [("x:y", "z"), ("x", "y:z"), ("x%3Ay", "z"), ("x:", "y:z"), ("", "x:y:z")]}
    assert len(keys) == 5
    assert render_key("order:{a}:{b}", {"a": a, "b": b}, "").count(":") == 2


def test_plain_composite_values_are_unchanged():
    assert render_key("order:{a}:{b}", {"a": 12, "b": "GB"}, "") == "order:12:GB"
    assert render_key("o/{a}-{b}/x", {"a": "p-q", "b": "r/s"}, "") == "o/p%2Dq-r/s/x"


def test_adjacent_placeholders_are_detected():
    assert adjacent_placeholders("{a}{b}") and adjacent_placeholders("k:{a}{b}:x")
    assert not adjacent_placeholders("{a}:{b}") and not adjacent_placeholders("k:{a}")
