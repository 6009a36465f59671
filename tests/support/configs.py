"""A small valid config, and copies of it with one field changed."""
import copy

BASE = {
    "postgres": {"host": "127.0.0.1", "port": 5432, "database": "app", "user": "u"},
    "kafka": {"bootstrap_servers": "127.0.0.1:9092"},
    "connect": {"url": "http://127.0.0.1:8083"},
    "tables": [{"name": "public.customers", "redis_key": "customer:{id}", "key": ["id"]}],
    "search": {"kind": "opensearch", "url": "http://127.0.0.1:9200"},
    "redis": {"url": "redis://127.0.0.1:6379/0"},
}


def with_(path: str, value):
    data = copy.deepcopy(BASE)
    node = data
    parts = path.split(".")
    for p in parts[:-1]:
        node = node[int(p)] if p.isdigit() else node[p]
    last = parts[-1]
    node[int(last) if last.isdigit() else last] = value
    return data
