"""The visibility watermark (connectors/visibility_watermark.py) against a model of the source: transactions
whose records go to several partitions, a producer that lands them in any order across partitions
(in order within one), a slot confirmed only up to what the producer has acknowledged, a pipeline
committing each partition's prefix at its own pace, samples taken at random moments. Whenever a
position is published, every transaction committed at or below it has all its records inside the
committed prefixes."""
from __future__ import annotations

import random

from hypothesis import given, settings, strategies as st

from connectors.visibility_watermark import Watermark, covered, format_lsn, parse_lsn

PARTS = 3


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 100_000))
def test_a_published_position_never_promises_a_record_the_pipeline_has_not_applied(seed: int):
    rnd = random.Random(seed)
    txns: list[tuple[int, list[int]]] = []        # (commit lsn, partitions of its records)
    lsn = 100
    for _ in range(rnd.randint(1, 40)):
        lsn += rnd.randint(1, 50)
        txns.append((lsn, [rnd.randrange(PARTS) for _ in range(rnd.randint(1, 4))]))
    pending = [(i, p) for i, (_, parts) in enumerate(txns) for p in parts]   # sent, in commit order
    landed: dict[int, list[int]] = {p: [] for p in range(PARTS)}             # partition -> txn index per offset
    acked = 0              # transactions whose every record has landed (a prefix: Connect's offset commit)
    confirmed = 0          # the slot's confirmed position
    committed = {p: 0 for p in range(PARTS)}
    mark = Watermark()
    while pending or any(committed[p] < len(landed[p]) for p in range(PARTS)):
        step = rnd.random()
        if step < 0.35 and pending:
            # the producer lands the oldest unsent record of some partition (order kept within one)
            part = rnd.choice(sorted({p for _, p in pending}))
            k = next(k for k, (_, p) in enumerate(pending) if p == part)
            i, p = pending.pop(k)
            landed[p].append(i)
            while acked < len(txns) and all(i2 != acked for i2, _ in pending):
                acked += 1
        elif step < 0.5:
            confirmed = txns[acked - 1][0] if acked else confirmed   # Connect commits, Debezium confirms
        elif step < 0.8:
            part = rnd.randrange(PARTS)                              # the pipeline commits some more
            committed[part] = rnd.randint(committed[part], len(landed[part]))
        else:
            mark.sample(confirmed, {"t": {str(p): len(landed[p]) for p in range(PARTS)}})
        position = mark.advance({"t": {str(p): n for p, n in committed.items()}})
        applied = [i for p in range(PARTS) for i in landed[p][:committed[p]]]
        for i, (commit, parts) in enumerate(txns):
            if commit <= position:   # every record of it applied
                assert applied.count(i) == len(parts), (i, commit, position)


def test_the_position_only_moves_forward_and_samples_covered_are_dropped():
    mark = Watermark()
    mark.sample(10, {"t": {"0": 5, "1": 0}})
    mark.sample(20, {"t": {"0": 8, "1": 2}})
    assert mark.advance({"t": {"0": 4}}) == 0
    assert mark.advance({"t": {"0": 6}}) == 10          # partition 1 had no record yet: nothing to wait for
    assert mark.advance({"t": {"0": 9, "1": 2}}) == 20 and not mark.samples
    mark.sample(15, {"t": {"0": 9, "1": 2}})             # a lower position (a slot read racing): never back
    assert mark.advance({"t": {"0": 9, "1": 2}}) == 20


def test_a_topic_the_pipeline_has_not_read_is_not_covered():
    assert not covered({"t": {"0": 3}}, {})
    assert covered({"t": {"0": 0}}, {})
    assert covered({"t": {0: 3}}, {"t": {"0": 3}})


def test_wal_positions_read_and_print_as_postgres_does():
    assert parse_lsn("16/B374D848") == 0x16B374D848 == parse_lsn(str(0x16B374D848))
    assert format_lsn(parse_lsn("16/B374D848")) == "16/B374D848"
