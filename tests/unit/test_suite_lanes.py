"""The suite's own lanes (tests/support/lanes.py) and tiers (tests/support/tiers.py): how the stack test
files are shared out between two stacks, and a tier failed in one lane ending the later tiers in all."""
from __future__ import annotations

import os

import pytest

from tests.support import lanes, tiers


def test_split_balances_seconds_and_keeps_every_file_once():
    weights = {"tests/drills/a.py": 300, "tests/integration/b.py": 200, "tests/integration/c.py": 120,
               "tests/integration/d.py": 90, "tests/integration/e.py": 5}
    files = sorted([*weights, "tests/integration/new.py"])   # one the weights do not know
    groups = lanes.split(files, weights)
    assert sorted(f for g in groups for f in g) == files
    seconds = [sum(weights.get(f, lanes.UNKNOWN_FILE_S) for f in g) for g in groups]
    assert max(seconds) - min(seconds) <= 90, (groups, seconds)


def test_a_folder_of_shared_servers_stays_in_one_lane():
    secure = [f"tests/integration/secure/test_{n}.py" for n in "abc"]
    weights = {secure[0]: 100, secure[1]: 100, secure[2]: 100, "tests/integration/x.py": 150,
               "tests/integration/y.py": 150}
    groups = lanes.split(sorted(weights), weights)
    assert any(set(secure) <= set(g) for g in groups), groups


def test_stack_test_files_are_every_file_outside_the_unit_tier():
    files = lanes.stack_test_files()
    assert "tests/drills/test_drills.py" in files and "tests/integration/secure/test_kafka_sasl.py" in files
    assert not [f for f in files if f.startswith("tests/unit/")]


def test_the_weights_name_only_files_that_exist():
    """A renamed or deleted file left in lane_weights.json would unbalance the lanes silently."""
    assert set(lanes._weights()) <= set(lanes.stack_test_files())


def test_a_tier_failed_in_another_lane_is_read_from_the_shared_file(tmp_path, monkeypatch):
    shared = tmp_path / "failed-tiers"
    monkeypatch.setenv(tiers.SHARED_FAILURES, str(shared))
    assert tiers.shared_failed_tiers() == set()
    shared.write_text("1\n1\n")
    assert tiers.shared_failed_tiers() == {1}
    monkeypatch.delenv(tiers.SHARED_FAILURES)
    assert tiers.shared_failed_tiers() == set()


@pytest.mark.parametrize("lane,expected", [(1, None), (2, "times-lane2.json")])
def test_each_stack_lane_writes_its_own_times(lane, expected):
    got = lanes.lane_times_file(os.path.join("x", "times.json"), lane)
    assert got == (os.path.join("x", "times.json") if expected is None else os.path.join("x", expected))
