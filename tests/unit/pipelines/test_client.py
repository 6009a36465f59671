"""pipelines/client.py: the wait, its timeout and its error, without a store."""
import subprocess
import sys

import pytest

from pipelines.client import NotVisible, wait_visible


def test_the_wait_returns_once_the_position_reaches_the_token():
    positions = iter([10, 50, 99, 100, 100])
    waited = wait_visible("0/64", "cache", timeout=5, read=lambda store: next(positions))
    assert 0 <= waited < 1


def test_a_token_ahead_times_out_naming_token_store_and_position():
    with pytest.raises(NotVisible) as err:
        wait_visible(1 << 40, "search", timeout=0.2, read=lambda store: 0x10)
    assert str(err.value).startswith("commit at 100/0 not visible in search within 0.2 s (the search holds "
                                     "changes up to 0/10;")
    assert isinstance(err.value, TimeoutError) and err.value.position == 0x10


def test_a_store_that_fails_to_answer_is_asked_again_then_reported():
    answers = iter([ConnectionError("refused"), 200])

    def read(store):
        got = next(answers)
        if isinstance(got, Exception):
            raise got
        return got

    assert wait_visible(100, "both", timeout=5, read=read) >= 0
    with pytest.raises(NotVisible, match="reading the position failed: ConnectionError: down"):
        wait_visible(100, "cache", timeout=0.1, read=lambda store: (_ for _ in ()).throw(ConnectionError("down")))


def test_a_wrong_store_is_refused():
    with pytest.raises(ValueError, match="store must be one of search, cache, both"):
        wait_visible(1, "index", read=lambda store: 0)


def test_the_client_imports_without_spark_or_the_pipeline():
    code = ("import sys, pipelines.client; bad = [m for m in sys.modules if m.split('.')[0] in "
            "('pyspark', 'pydantic', 'psycopg', 'confluent_kafka', 'pyarrow', 'pandas') or m.startswith("
            "('pipelines.spark', 'pipelines.config', 'pipelines.ops'))]; print(bad); assert not bad")
    subprocess.run([sys.executable, "-c", code], check=True)


class FakeConnection:
    """psycopg 3's shape: info.transaction_status, cursor(), rollback()."""

    def __init__(self, status: int, autocommit: bool = False):
        self.info = type("Info", (), {"transaction_status": status})()
        self.autocommit, self.rolled_back = autocommit, False

    def cursor(self):
        conn = self

        class Cursor:
            def execute(self, sql):
                conn.info.transaction_status = 2 if not conn.autocommit else 0   # INTRANS

            def fetchone(self):
                return ("16/B374D848",)

            def close(self):
                pass
        return Cursor()

    def rollback(self):
        self.rolled_back = True


def test_the_token_is_read_after_the_commit_and_leaves_no_transaction_open():
    from pipelines.client import commit_token

    conn = FakeConnection(0)
    assert commit_token(conn) == 0x16B374D848 and conn.rolled_back
    assert not FakeConnection(0, autocommit=True).rolled_back
    with pytest.raises(ValueError, match="inside a transaction: commit first"):
        commit_token(FakeConnection(2))
