"""The Redis generation switch is SWAPDB, and it is idempotent: a rebuild killed right after its
switch and run again must not swap the old generation back (and then flush the new one)."""
from urllib.parse import urlsplit

import pytest
import redis

from derived.sinks.cache import generations as cachegen
from derived.sinks.store_errors import GenerationError

pytestmark = pytest.mark.integration
LIVE, SPARE = 11, 12


def db(stack, n):
    return redis.Redis.from_url(urlsplit(stack.redis_url)._replace(path=f"/{n}").geturl())


def test_a_switch_run_again_after_a_crash_keeps_the_new_generation(stack):
    live, spare = db(stack, LIVE), db(stack, SPARE)
    live.flushdb()
    spare.flushdb()
    live.set("k", "old")
    cachegen.check_spare(live, spare, LIVE, SPARE, resume=False)
    cachegen.begin(spare, "r1")
    spare.set("k", "new")
    cachegen.switch(live, spare, LIVE, SPARE, "r1")
    assert live.get("k") == b"new"
    # Killed here (before the state file said "switched"): the rerun switches again.
    cachegen.switch(live, spare, LIVE, SPARE, "r1")
    assert live.get("k") == b"new" and spare.get("k") == b"old"
    cachegen.finish(live, "r1")
    cachegen.finish(live, "r1")  # idempotent too
    assert live.get(cachegen.MARK) is None
    cachegen.drop_old(spare)
    assert live.get("k") == b"new" and spare.dbsize() == 0
    with pytest.raises(GenerationError, match="neither database"):
        cachegen.switch(live, spare, LIVE, SPARE, "r2")
    live.flushdb()
