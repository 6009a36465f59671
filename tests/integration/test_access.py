"""Access: unreachable stores and wrong credentials refuse to start (naming the endpoint and the
fields); a known password goes through every command and a running pipeline and is printed nowhere."""
import uuid

import pytest
import redis

from tests.support.integration import cli, drop_connector, pg, write_config

pytestmark = [pytest.mark.integration]
SECRET = "Acl-Pa55-7f3e91c2"
WRONG = "Wr0ng-Pa55-b81d44"


@pytest.fixture
def acl_user(stack):
    """A Redis ACL user with a password (the test server has no default password)."""
    r = redis.Redis.from_url(stack.redis_url)
    user = f"cdckit_{uuid.uuid4().hex[:6]}"
    r.execute_command("ACL", "SETUSER", user, "on", f">{SECRET}", "~*", "&*", "+@all")
    yield user
    r.execute_command("ACL", "DELUSER", user)


@pytest.mark.parametrize("field,value,named", [
    ("search", {"kind": "opensearch", "url": "http://127.0.0.1:9"}, "search at http://127.0.0.1:9 is unreachable"),
    ("redis", {"url": "redis://127.0.0.1:9/0"}, "redis at redis://127.0.0.1:9/0 is unreachable"),
    ("kafka", {"bootstrap_servers": "127.0.0.1:9"}, "Kafka at 127.0.0.1:9 is unreachable"),
])
def test_unreachable_endpoint_refuses_to_start(stack, tmp_path, field, value, named):
    data = stack.config(tables=[{"name": "public.nothing_here"}], spark={"checkpoint_dir": str(tmp_path / "c")})
    data[field] = value
    for command in ("run", "bootstrap"):
        result = cli(command, "-c", str(write_config(tmp_path, data)), timeout=60)
        assert result.returncode == 3, result.stderr[-2000:]
        assert named in result.stderr
        assert not (tmp_path / "c" / "query").exists()  # nothing started


def test_wrong_redis_credentials_refuse_to_start_unprinted(stack, tmp_path, acl_user):
    data = stack.config(tables=[{"name": "public.nothing_here"}], spark={"checkpoint_dir": str(tmp_path / "c")})
    data["redis"].update(username=acl_user, password={"env": "CDCKIT_REDIS_PW"})
    result = cli("run", "-c", str(write_config(tmp_path, data)), env={"CDCKIT_REDIS_PW": WRONG}, timeout=60)
    assert result.returncode == 3
    assert "refused the credentials (check redis.username / redis.password)" in result.stderr
    assert WRONG not in result.stdout + result.stderr


def test_known_password_appears_in_no_output_or_log(stack, tmp_path, acl_user):
    name = f"sec_{uuid.uuid4().hex[:6]}"
    table = f"public.{name}"
    with pg(stack) as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v text)")
        conn.execute(f"INSERT INTO {table} SELECT g, 'v' || g FROM generate_series(1, 200) g")
    data = stack.config(tables=[{"name": table, "redis_key": f"{name}:{{id}}", "index": name}],
                        spark={"checkpoint_dir": str(tmp_path / "ckpt"), "trigger": "500 ms"}, metrics_port=0)
    data["redis"].update(username=acl_user, password={"env": "CDCKIT_REDIS_PW"})
    data["postgres"]["password"] = {"env": "CDCKIT_PG_PW"}  # trust auth accepts it; Connect gets it too
    path = str(write_config(tmp_path, data))
    env = {"CDCKIT_REDIS_PW": SECRET, "CDCKIT_PG_PW": SECRET}
    connect_log = stack.settings.log("connect") if stack.settings else None
    log_start = connect_log.stat().st_size if connect_log else 0
    try:
        outputs = []
        for args in (["config", "check"], ["connector", "apply"], ["bootstrap", "--once"], ["connector", "status", "--json"],
                     ["status", "--json"], ["verify", "--json"], ["rebuild", "cache", "--dry-run"], ["dlq", "list"]):
            result = cli(*args, "-c", path, env=env, timeout=300)
            outputs.append((args, result.returncode, result.stdout + result.stderr))
        codes = {" ".join(a): c for a, c, _ in outputs}
        assert codes["bootstrap --once"] == 0 and codes["verify --json"] == 0, outputs[5][2][-3000:]
        for args, _, text in outputs:
            assert SECRET not in text, args
        if connect_log:
            assert SECRET not in connect_log.read_bytes()[log_start:].decode(errors="replace")
        leftovers = list((tmp_path / "ckpt").rglob("*"))
        assert leftovers and not any(SECRET.encode() in p.read_bytes() for p in leftovers if p.is_file())
    finally:
        drop_connector(stack, data)
