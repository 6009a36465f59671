"""Where changes are written: one Sink protocol (prepare, apply, truncate) for the search index and the
Redis cache, one dead-letter sink protocol, one retry helper; generations and markers of the stores."""
