"""Nested documents' letters for `dlq replay` (pipelines/ops/dead_letter_documents.py): the newest
letter's version per document, and the root key read back from the document id."""
from connectors.envelope import document_id
from connectors.kafka.dead_letter_topic import Letter
from derived.change import Version
from pipelines.ops.dead_letter_documents import is_document_letter, key_of, newest_versions, parse_version


def letter(offset: int, topic: str, key: bytes | None, version: Version | None) -> Letter:
    return Letter(offset, topic, 0, offset, "apply", "refused", key, None, True,
                  None if version is None else version.redis())


def test_a_version_round_trips_through_its_header():
    v = Version(2**40 + 7, 1, 2**41 + 3)
    assert parse_version(v.redis()) == v
    assert parse_version(None) == parse_version("garbage") == Version(0, 0, 0)


def test_the_newest_letter_of_each_document_wins():
    letters = [letter(0, "document:orders", b"1", Version(5, 1, 9)),
               letter(1, "document:orders", b"1", Version(7, 0, 0)),
               letter(2, "document:orders", b"1", Version(6, 1, 1)),
               letter(3, "document:orders", b"2", None),
               letter(4, "document:carts", b"1", Version(1, 1, 1)),
               letter(5, "document:orders", None, Version(9, 9, 9))]
    assert newest_versions(letters) == {"orders": {"1": Version(7, 0, 0), "2": Version(0, 0, 0)},
                                        "carts": {"1": Version(1, 1, 1)}}
    assert is_document_letter(letters[0]) and not is_document_letter(letter(6, "app.public.orders", b"{}", None))


def test_a_composite_root_key_is_read_back_from_its_document_id():
    key = {"tenant": "a|b", "id": "7"}
    assert key_of(document_id(key, ["tenant", "id"]), ["tenant", "id"]) == key
    assert key_of("42", ["id"]) == {"id": "42"}
