"""The Redis cache sink, its Lua scripts, key templates and generations (databases swapped)."""
