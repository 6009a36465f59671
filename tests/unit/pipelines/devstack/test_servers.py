import uuid

from pipelines.devstack import servers


def testkraft_cluster_id_never_starts_with_a_dash(monkeypatch):
    # 0xF8 encodes to '-' first in URL-safe base64; the storage tool would read the id as an option.
    draws = iter([uuid.UUID(bytes=b"\xf8" + b"\x00" * 15), uuid.UUID(bytes=b"\x10" * 16)])
    monkeypatch.setattr(servers.uuid, "uuid4", lambda: next(draws))
    cluster_id = servers.kraft_cluster_id()
    assert not cluster_id.startswith("-")
    assert len(cluster_id) == 22
