import pytest
import yaml

from pipelines.config import load_config, parse_config
from pipelines.errors import ConfigError
from tests.support.configs import BASE, with_


def test_defaults_derive_names():
    cfg = parse_config(BASE)
    t = cfg.tables[0]
    assert cfg.connector_name == "cdc-postgres"
    assert cfg.dead_letter_topic == "cdc.dlq"
    assert cfg.topic_for(t) == "cdc.public.customers"
    assert cfg.table_for_topic("cdc.public.customers") is t
    assert t.index_name == "public_customers"
    assert cfg.spark.trigger == "500 milliseconds"


def test_topic_pattern_takes_every_table_topic_of_the_prefix():
    import re

    pattern = re.compile(parse_config(BASE).topic_pattern)
    taken = ["cdc.public.customers", "cdc.public.added_later", "cdc.public.cdckit_heartbeat"]
    left = ["cdc.dlq", "cdc-heartbeat", "cdcx.public.a", "cdc.a.b.c"]
    assert [t for t in taken + left if pattern.fullmatch(t)] == taken


@pytest.mark.parametrize("path,value,field", [
    ("search.kind", "solr", "search.kind"),
    ("tables.0.name", "customers", "tables.0.name"),
    ("postgres.port", 99999, "postgres.port"),
    ("connect.url", "ftp://x", "connect.url"),
    ("redis.url", "redis://:hunter2@127.0.0.1:6379/0", "redis.url"),
    ("tables.0.redis_key", "customer:{email}", "tables.0"),
    ("spark", {"trigger": "soon"}, "spark.trigger"),
    ("tables", [], "tables"),
    ("postgres.bogus", 1, "postgres.bogus"),
    ("kafka.topic_config", {"cleanup.policy": "delete"}, "kafka.topic_config"),
    ("kafka.topic_config", {"Segment MS": 1}, "kafka.topic_config"),
    ("postgres.truncate_table", "truncates", "postgres.truncate_table"),
    ("tables.0.where", "status = ", "tables.0.where"),
    ("tables.0.where", {"search": "a ~ 1"}, "tables.0.where"),
    ("tables.0.where", {"index": "a = 1"}, "tables.0.where"),
    ("tables.0.soft_delete", {"value": 1}, "tables.0.soft_delete.column"),
])
def test_mistake_names_the_field(path, value, field):
    with pytest.raises(ConfigError) as exc:
        parse_config(with_(path, value))
    assert exc.value.field == field
    assert field in str(exc.value)


def test_rename_outside_projection_is_refused():
    with pytest.raises(ConfigError, match="tables.0"):
        parse_config(with_("tables.0", {"name": "public.t", "columns": ["id"], "rename": {"email": "mail"}}))


def test_missing_secret_names_the_field(monkeypatch):
    monkeypatch.delenv("CDCKIT_TEST_PW", raising=False)
    with pytest.raises(ConfigError) as exc:
        parse_config(with_("postgres.password", {"env": "CDCKIT_TEST_PW"}))
    assert exc.value.field == "postgres.password"
    assert "CDCKIT_TEST_PW" in str(exc.value)


def test_secret_from_env_and_file(monkeypatch, tmp_path):
    monkeypatch.setenv("CDCKIT_TEST_PW", "s3cret-env")
    (tmp_path / "pw").write_text("s3cret-file\n")
    data = with_("postgres.password", {"env": "CDCKIT_TEST_PW"})
    data["redis"]["password"] = {"file": str(tmp_path / "pw")}
    cfg = parse_config(data)
    assert cfg.postgres.dsn_kwargs()["password"] == "s3cret-env"
    assert cfg.redis.password.get() == "s3cret-file"
    assert "s3cret" not in repr(cfg)


def test_sasl_needs_credentials():
    with pytest.raises(ConfigError, match="kafka"):
        parse_config(with_("kafka.security_protocol", "SASL_SSL"))


def test_yaml_errors_and_relative_checkpoint(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("postgres: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "missing.yaml")


    good = tmp_path / "conf" / "c.yaml"
    good.parent.mkdir()
    good.write_text(yaml.safe_dump(BASE))
    assert load_config(good).spark.checkpoint_dir == (good.parent / ".cdckit/checkpoints").resolve()


def test_shipped_example_configs_are_valid(tmp_path):
    from pipelines.devstack.roles import ensure_password_files
    from tests.support.stack import ROOT

    example = tmp_path / "cdckit.example.yaml"  # its secret files are relative to it
    example.write_text((ROOT / "cdckit.example.yaml").read_text())
    ensure_password_files(example)
    cfg = load_config(example)
    assert cfg.tables[0].redis_key_template == "customer:{id}"
    secrets = tmp_path / ".devstack" / "secrets"
    assert cfg.postgres.password.file == secrets / "cdckit_cdc.password"
    assert (secrets / "cdckit_cdc.password").stat().st_mode & 0o077 == 0
    assert cfg.postgres.reader_dsn_kwargs()["user"] == "cdckit_reader" != cfg.postgres.dsn_kwargs()["user"]
    assert cfg.postgres.reader_dsn_kwargs()["password"] != cfg.postgres.dsn_kwargs()["password"]


def test_secret_files_and_ca_bundles_are_relative_to_the_config_file(tmp_path, monkeypatch):
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "pw").write_text("s3cret\n")
    data = with_("postgres", {**BASE["postgres"], "password": {"file": "pw"}, "sslrootcert": "ca.pem"})
    path = tmp_path / "conf" / "cdckit.yaml"
    path.write_text(yaml.safe_dump(data))
    monkeypatch.chdir(tmp_path)  # not the config's folder
    cfg = load_config(path)
    assert cfg.postgres.password.get() == "s3cret"
    assert cfg.postgres.sslrootcert == tmp_path / "conf" / "ca.pem"


def test_a_reader_password_without_a_reader_is_refused():
    with pytest.raises(ConfigError) as exc:
        parse_config(with_("postgres", {**BASE["postgres"], "reader_password": {"env": "X"}}))
    assert exc.value.field == "postgres" and "reader_user" in str(exc.value)
    plain = parse_config(BASE)
    assert plain.postgres.reader_dsn_kwargs() == plain.postgres.dsn_kwargs()


@pytest.mark.parametrize("given", ["real_time", "realtime", "Real-Time"])
def test_real_time_mode_is_refused_saying_why(given):
    with pytest.raises(ConfigError) as exc:
        parse_config(with_("spark", {"trigger": given}))
    assert exc.value.field == "spark.trigger" and "Real-Time Mode cannot carry" in str(exc.value)


@pytest.mark.parametrize("given,spark", [("500 ms", "500 milliseconds"), ("1 second", "1 seconds"),
                                         ("2s", "2 seconds"), ("1 minute", "1 minutes")])
def test_trigger_is_normalised_for_spark(given, spark):
    assert parse_config(with_("spark", {"trigger": given})).spark.trigger == spark


def test_tables_with_overlapping_redis_keys_are_refused():
    tables = [{"name": "public.users", "redis_key": "user:{id}"}, {"name": "public.prefs", "redis_key": "user:{id}:prefs"}]
    with pytest.raises(ConfigError) as exc:
        parse_config(with_("tables", tables))
    assert exc.value.field == "tables.1.redis_key" and "public.users" in str(exc.value)
    tables[1]["redis_key"] = "prefs:{id}"
    assert len(parse_config(with_("tables", tables)).tables) == 2


def test_dead_letters_keep_values_unless_told_not_to():
    assert parse_config(BASE).dlq.include_values is True
    assert parse_config(with_("dlq", {"include_values": False})).dlq.include_values is False
    with pytest.raises(ConfigError, match="dlq.include_values"):
        parse_config(with_("dlq", {"include_values": "sometimes"}))
    with pytest.raises(ConfigError, match="dlq.topic"):
        parse_config(with_("dlq", {"topic": "x"}))


def test_table_search_block():
    t = {"name": "public.t", "search": {"settings": {"refresh_interval": "5s"}, "mappings": {"a": {"type": "long"}},
                                        "dynamic": "strict", "text": "keyword", "json": "flattened"}}
    cfg = parse_config({**with_("tables", [t]), "search": {**BASE["search"], "index_settings": {"number_of_replicas": 0}}})
    s = cfg.tables[0].search
    assert (s.settings, s.dynamic, s.text, s.json_mode) == ({"refresh_interval": "5s"}, "strict", "keyword", "flattened")
    assert cfg.tables[0].search_mappings == {"a": {"type": "long"}}
    assert cfg.search.index_settings == {"number_of_replicas": 0}
    defaults = parse_config(BASE).tables[0]
    assert (defaults.search.dynamic, defaults.search.text, defaults.search.json_mode) == (True, "text+keyword", "flattened")


def test_older_mappings_spelling_still_works():
    cfg = parse_config(with_("tables.0.mappings", {"email": {"type": "keyword"}}))
    assert cfg.tables[0].search_mappings == {"email": {"type": "keyword"}}


@pytest.mark.parametrize("path,value,field", [
    ("tables.0.search", {"dynamic": "runtime"}, "tables.0.search.dynamic"),
    ("tables.0.search", {"text": "wildcard"}, "tables.0.search.text"),
    ("tables.0.search", {"json": "nested"}, "tables.0.search.json"),
    ("tables.0.search", {"bogus": 1}, "tables.0.search.bogus"),
    ("tables.0.search", {"mappings": {"a": "long"}}, "tables.0.search.mappings.a"),
    ("tables.0.search", {"settings": {"index": {"gc_deletes": "1h"}}}, "tables.0.search.settings"),
    ("search.index_settings", {"index.gc_deletes": "1h"}, "search.index_settings"),
])
def test_search_definition_mistakes_name_the_field(path, value, field):
    with pytest.raises(ConfigError) as exc:
        parse_config(with_(path, value))
    assert exc.value.field == field


def test_mappings_in_both_places_are_refused():
    data = with_("tables.0.mappings", {"a": {"type": "long"}})
    data["tables"][0]["search"] = {"mappings": {"b": {"type": "long"}}}
    with pytest.raises(ConfigError) as exc:
        parse_config(data)
    assert exc.value.field == "tables.0.search" and "older spelling" in str(exc.value)


@pytest.mark.parametrize("lookups,field,words", [
    ([{"key": "{customer_id}"}], "tables.0.lookups.0.key", "prefix of its own"),
    ([{"key": "cdckit:x:{customer_id}"}], "tables.0.lookups.0.key", "prefix of its own"),
    ([{"key": "by_customer"}], "tables.0.lookups.0.key", "placeholder"),
    ([{"key": "by:{a}{b}"}], "tables.0.lookups.0.key", "text between them"),
    ([{"key": "by:{a}", "member": "plain"}], "tables.0.lookups.0.member", "placeholder"),
    ([{"key": "by:{a}", "sort": "x"}], "tables.0.lookups.0.sort", "Extra inputs"),
    ([{"key": "by:{a}"}, {"key": "by:{a}"}], "tables.0", "same key"),
    ([{"key": "public.t:{a}"}], "tables.0.lookups.0.key", "match the key pattern"),
    ([{"key": "by:{a:.2f}"}], "tables.0.lookups.0.key", "no format spec"),
    ([{"key": "bycx{a}"}, {"key": "byc{a}:y"}], "tables.0.lookups.0.key", "match the key pattern"),

])
def test_lookup_mistakes_name_the_field(lookups, field, words):
    with pytest.raises(ConfigError) as exc:
        parse_config(with_("tables.0", {"name": "public.t", "lookups": lookups}))
    assert exc.value.field == field and words in str(exc.value)


def test_a_lookup_member_names_the_row():
    table = {"name": "public.t", "key": ["a", "b"], "redis_key": "t:{a}:{b}",
             "lookups": [{"key": "t_by_c:{c}", "member": "{a}"}]}
    with pytest.raises(ConfigError, match="must name the row"):
        parse_config(with_("tables.0", table))
    for member in ("{a}:{b}", "{_id}", "x{_id}"):
        table["lookups"][0]["member"] = member
        parse_config(with_("tables.0", table))


def test_lookups_need_the_cache_and_keys_that_do_not_expire():
    table = {"name": "public.t", "lookups": [{"key": "t_by_owner:{owner}", "score": "rank"}]}
    assert parse_config(with_("tables.0", table)).tables[0].lookups[0].columns == ["owner", "rank"]
    with pytest.raises(ConfigError, match="redis_ttl_s"):
        parse_config(with_("tables.0", {**table, "redis_ttl_s": 60}))
    data = with_("tables.0", table)
    data["sinks"] = ["search"]
    with pytest.raises(ConfigError) as exc:
        parse_config(data)
    assert exc.value.field == "tables.0.lookups"
