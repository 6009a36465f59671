"""What scripts/quickstart does before starting the sync on a local stack that ran before: the
local stack's search engine (osmem) and Redis keep nothing across `scripts/devstack down`, while
Kafka and the checkpoints do. The job then refuses to write into the emptied stores (a store that
looks alive but misses everything older); the stores are rebuilt from the topics first."""
from __future__ import annotations

import sys


def lost_stores(config_path: str) -> list[str]:
    """'search' / 'cache' whose marker is gone, for a pipeline that has applied batches before."""
    from derived.sinks import markers
    from pipelines.apply.stores import redis_client, search_engine
    from pipelines.config import load_config
    from pipelines.state.query_offsets import applied_offsets

    cfg = load_config(config_path)
    if applied_offsets(cfg.spark.checkpoint_dir) is None:
        return []  # never ran: nothing to lose
    return markers.missing(cfg.topic_prefix, search_engine(cfg) if "search" in cfg.sinks else None,
                           redis_client(cfg) if "cache" in cfg.sinks else None)


if __name__ == "__main__":
    gone = lost_stores(sys.argv[1])
    print("all" if len(gone) == 2 else (gone[0] if gone else ""))
