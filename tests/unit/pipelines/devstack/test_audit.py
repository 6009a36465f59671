"""The offline dependency audit: OSV range evaluation, findings, acceptances, the vendored snapshot
(.ci/advisories/pypi.json), its refresh from an advisory-database git copy, and the lock."""
import json
import subprocess
import textwrap
from datetime import datetime, timezone

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from pipelines.devstack import advisories, audit, lock
from pipelines.devstack.audit import Acceptance, AuditError, Finding
from pipelines.devstack.osv import UnreadableRange, affects, fixed_in, in_range

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def eco(*events):
    return {"type": "ECOSYSTEM", "events": [dict([e]) for e in events]}


def entry(package="demo", ranges=(), versions=()):
    item = {"package": package, "ranges": list(ranges)}
    if versions:
        item["versions"] = list(versions)
    return item


def advisory(id, package="demo", ranges=(), versions=(), aliases=(), summary="something bad", **extra):
    return {"id": id, "aliases": list(aliases), "summary": summary,
            "affected": [entry(package, ranges, versions)], **extra}


def snapshot(advisory_list, packages=("demo",), date="2025-12-20T00:00:00+00:00"):
    return {"format": 1, "source": {"repository": "https://github.com/pypa/advisory-database",
                                    "commit": "0" * 40, "date": date},
            "packages": list(packages), "advisories": list(advisory_list)}


# --- OSV ranges ---------------------------------------------------------------------------------

@pytest.mark.parametrize("version, hit", [("0.9", False), ("1.0", True), ("1.4.9", True),
                                          ("1.5", False), ("2.0", False)])
def test_introduced_and_fixed_bound_a_half_open_range(version, hit):
    assert in_range(Version(version), [{"introduced": "1.0"}, {"fixed": "1.5"}]) is hit


@pytest.mark.parametrize("version, hit", [("0.1", True), ("2.3", True), ("2.3.0", True), ("2.3rc1", True),
                                          ("2.3.post1", False), ("2.3.1rc1", False), ("2.3.1", False)])
def test_last_affected_includes_its_own_version(version, hit):
    assert in_range(Version(version), [{"introduced": "0"}, {"last_affected": "2.3"}]) is hit


def test_introduced_zero_without_a_fix_affects_everything_including_dev_releases():
    events = [{"introduced": "0"}]
    assert all(in_range(Version(v), events) for v in ("0.dev0", "0.0.1", "99.0"))


def test_several_pairs_in_one_range_in_any_order():
    # as urllib3's PYSEC-2023-192 lists them: the 2.x pair first, then the 1.x one
    events = [{"introduced": "2.0.0"}, {"fixed": "2.0.6"}, {"introduced": "0"}, {"fixed": "1.26.17"}]
    hits = {v: in_range(Version(v), events) for v in ("1.26.16", "1.26.17", "1.27", "2.0.0", "2.0.5", "2.0.6")}
    assert hits == {"1.26.16": True, "1.26.17": False, "1.27": False,
                    "2.0.0": True, "2.0.5": True, "2.0.6": False}


def test_any_of_several_ranges_affects():
    item = entry(ranges=[eco(("introduced", "1.0"), ("fixed", "1.2")), eco(("introduced", "3.0"), ("fixed", "3.1"))])
    assert [affects(item, v) for v in ("1.1", "2.0", "3.0.5", "3.1")] == [True, False, True, False]


@pytest.mark.parametrize("version, hit", [("2.0.0rc1", True), ("2.0.0a1", True), ("2.0.0", False),
                                          ("2.0.0.post1", False), ("2.0.1.dev0", False)])
def test_a_pre_release_of_the_fix_is_still_affected(version, hit):
    assert affects(entry(ranges=[eco(("introduced", "0"), ("fixed", "2.0.0"))]), version) is hit


@pytest.mark.parametrize("version, hit", [("3.0.0rc1", False), ("3.0.0.dev1", False), ("3.0.0", True)])
def test_a_pre_release_before_the_introduction_is_not(version, hit):
    assert affects(entry(ranges=[eco(("introduced", "3.0.0"), ("fixed", "3.0.2"))]), version) is hit


def test_versions_list_alone_or_beside_ranges():
    listed = entry(versions=["0.12.01", "1.0", "not-pep440"])
    assert affects(listed, "0.12.1")           # PEP 440 normalisation: 0.12.01 is 0.12.1
    assert affects(listed, "1.0.0")
    assert not affects(listed, "1.0.1")
    both = entry(ranges=[eco(("introduced", "2.0"), ("fixed", "2.1"))], versions=["1.5"])
    assert affects(both, "1.5") and affects(both, "2.0.3") and not affects(both, "1.6")


def test_git_ranges_are_not_version_ranges():
    item = entry(ranges=[{"type": "GIT", "events": [{"introduced": "0"}, {"fixed": "abc123"}]}])
    assert not affects(item, "1.0")


def test_limit_caps_a_range():
    assert in_range(Version("1.9"), [{"introduced": "0"}, {"limit": "2.0"}])
    assert not in_range(Version("2.0"), [{"introduced": "0"}, {"limit": "2.0"}])


def test_an_unreadable_event_version_is_an_error_not_a_pass():
    with pytest.raises(UnreadableRange, match="'1.0-beta-x'"):
        affects(entry(ranges=[eco(("introduced", "0"), ("fixed", "1.0-beta-x"))]), "0.5")


def test_fixed_in_lists_the_fixes_above_the_version():
    item = entry(ranges=[eco(("introduced", "2.0.0"), ("fixed", "2.0.6"), ("introduced", "0"), ("fixed", "1.26.17"))])
    assert fixed_in(item, "1.26.1") == ["1.26.17", "2.0.6"]
    assert fixed_in(item, "2.0.1") == ["2.0.6"]


# --- findings -----------------------------------------------------------------------------------

def test_withdrawn_advisories_are_skipped():
    open_range = [eco(("introduced", "0"))]
    found, problems = audit.find({"demo": "1.0"}, [
        advisory("PYSEC-1", ranges=open_range, withdrawn="2024-01-01T00:00:00Z"),
        advisory("PYSEC-2", ranges=open_range)])
    assert [f.id for f in found] == ["PYSEC-2"] and problems == []


def test_aliases_of_one_package_merge_into_one_finding_with_the_pysec_id():
    found, _ = audit.find({"demo": "1.0", "other": "1.0"}, [
        advisory("GHSA-aaaa", ranges=[eco(("introduced", "0"), ("fixed", "1.1"))], aliases=["CVE-1"]),
        advisory("PYSEC-9", ranges=[eco(("introduced", "0"), ("fixed", "1.2"))], aliases=["CVE-1", "GHSA-aaaa"]),
        advisory("PYSEC-10", "other", ranges=[eco(("introduced", "0"))], aliases=["CVE-1"]),
    ])
    assert [(f.id, f.package) for f in found] == [("PYSEC-9", "demo"), ("PYSEC-10", "other")]
    assert found[0].aliases == ["GHSA-aaaa", "CVE-1"]
    assert found[0].fixed_in == ["1.1", "1.2"]


def test_package_names_are_normalised_everywhere(tmp_path):
    lock_file = tmp_path / "requirements.lock"
    lock_file.write_text("PyYAML==5.3\nzope.interface==1.0\n")
    pins = lock.read_lock(lock_file)
    assert pins == {"pyyaml": "5.3", "zope-interface": "1.0"}
    found, _ = audit.find(pins, [advisory("PYSEC-3", "pyyaml", ranges=[eco(("introduced", "0"), ("fixed", "5.4"))])])
    warnings = audit.apply_accepted(found, [Acceptance("PYSEC-3", "PyYAML", "reason")])
    assert found[0].accepted == "reason" and warnings == []


def test_an_unreadable_range_fails_the_audit():
    bad = advisory("PYSEC-4", ranges=[eco(("introduced", "0"), ("fixed", "x.y~z"))])
    report = audit.audit({"demo": "1.0"}, snapshot([bad]), [], now=NOW)
    assert not report.ok and "cannot evaluate PYSEC-4 (demo)" in report.errors[0]


# --- acceptances ----------------------------------------------------------------------------------

def test_an_acceptance_matches_by_alias_and_package_only():
    def findings():
        return [Finding("PYSEC-5", "demo", "1.0", [], "s", ["CVE-5", "GHSA-5"])]
    accepted_by_cve = findings()
    assert audit.apply_accepted(accepted_by_cve, [Acceptance("CVE-5", "demo", "not reachable")]) == []
    assert accepted_by_cve[0].accepted == "not reachable"
    other_package = findings()
    warnings = audit.apply_accepted(other_package, [Acceptance("PYSEC-5", "elsewhere", "x")])
    assert other_package[0].accepted is None
    assert warnings == ["accepted PYSEC-5 (elsewhere) matches no finding any more: "
                        "remove it from the acceptance file"]


def test_read_accepted(tmp_path):
    path = tmp_path / "accepted.yaml"
    assert audit.read_accepted(path) == []                       # no file: nothing accepted
    path.write_text("accepted: []\n")
    assert audit.read_accepted(path) == []
    path.write_text("accepted:\n  - id: PYSEC-1\n    package: PyYAML\n    reason: only parses our own files\n")
    assert audit.read_accepted(path) == [Acceptance("PYSEC-1", "pyyaml", "only parses our own files")]
    path.write_text("accepted:\n  - id: PYSEC-1\n    package: pyyaml\n")
    with pytest.raises(AuditError, match=r"entry 1 \(PYSEC-1\) has no reason"):
        audit.read_accepted(path)
    path.write_text("accepted:\n  - {id: PYSEC-1, package: x, reason: y, until: 2020}\n")
    with pytest.raises(AuditError, match="unknown keys"):
        audit.read_accepted(path)
    path.write_text("accepted: PYSEC-1\n")
    with pytest.raises(AuditError, match="must be a list"):
        audit.read_accepted(path)


def test_the_repository_acceptance_file_reads():
    for acceptance in audit.read_accepted(audit.ACCEPTED_FILE):
        assert len(acceptance.reason) > 10


# --- the whole audit and its entry point ----------------------------------------------------------

def write_inputs(tmp_path, pins, advisory_list, accepted="accepted: []\n", packages=None):
    (tmp_path / "lock").write_text("".join(f"{n}=={v}\n" for n, v in pins.items()))
    (tmp_path / "db.json").write_text(json.dumps(snapshot(advisory_list, packages or list(pins),
                                                          date=datetime.now(timezone.utc).isoformat())))
    (tmp_path / "accepted.yaml").write_text(accepted)
    return ["--lock", str(tmp_path / "lock"), "--advisories", str(tmp_path / "db.json"),
            "--accepted", str(tmp_path / "accepted.yaml"), "--no-environment"]


def test_a_finding_fails_the_audit_with_its_listing(tmp_path, capsys):
    args = write_inputs(tmp_path, {"demo": "1.4", "clean": "1.0"}, [
        advisory("PYSEC-2020-7", ranges=[eco(("introduced", "1.0"), ("fixed", "1.5"))], aliases=["CVE-2020-7"],
                 summary="demo leaks secrets"),
        advisory("PYSEC-2020-8", ranges=[eco(("introduced", "0"), ("fixed", "1.3"))])])
    assert audit.main(args) == 1
    out = capsys.readouterr().out
    assert "1 NOT ACCEPTED finding(s):\n  PYSEC-2020-7 (also CVE-2020-7)\n    demo==1.4, fixed in: 1.5\n" \
           "    demo leaks secrets\n" in out
    assert "PYSEC-2020-8" not in out
    assert out.rstrip().endswith("audit: FAILED")


def test_an_accepted_finding_passes_and_is_still_shown(tmp_path, capsys):
    args = write_inputs(tmp_path, {"demo": "1.4"},
                        [advisory("PYSEC-2020-7", ranges=[eco(("introduced", "0"))])],
                        accepted="accepted:\n- id: PYSEC-2020-7\n  package: Demo\n  reason: cdckit never calls it\n")
    assert audit.main(args) == 0
    out = capsys.readouterr().out
    assert "1 accepted finding(s):" in out and "    demo==1.4, fixed in: no fixed version\n" in out
    assert "    accepted: cdckit never calls it" in out and out.rstrip().endswith("audit: ok")


def test_unreadable_inputs_exit_2(tmp_path, capsys):
    args = write_inputs(tmp_path, {"demo": "1.0"}, [])
    (tmp_path / "lock").write_text("demo>=1.0\n")
    assert audit.main(args) == 2
    assert "not name==version: 'demo>=1.0'" in capsys.readouterr().err


def test_the_environment_must_match_the_lock(tmp_path, capsys):
    args = write_inputs(tmp_path, {"demo": "1.0"}, [])[:-1]        # without --no-environment
    assert audit.main(args, environment=lambda: {"demo": "1.0"}) == 0
    assert audit.main(args, environment=lambda: {"demo": "1.1", "new": "2.0"}) == 1
    out = capsys.readouterr().out
    assert "demo is locked at 1.0 but 1.1 is installed" in out
    assert "new==2.0 is installed for cdckit but not in the lock" in out


def test_a_locked_package_the_snapshot_was_not_made_for_fails(tmp_path):
    report = audit.audit({"demo": "1.0", "newcomer": "1.0"}, snapshot([], packages=["demo"]), [], now=NOW)
    assert report.errors == ["no advisories were vendored for newcomer (locked after the snapshot was made): "
                             "run scripts/refresh-advisories"]


def test_an_old_snapshot_is_a_warning_only():
    old = snapshot([], date="2025-06-01T00:00:00+00:00")
    report = audit.audit({"demo": "1.0"}, old, [], max_age_days=90, now=NOW)
    assert report.ok and len(report.warnings) == 1 and "214 days old (over 90" in report.warnings[0]
    assert audit.audit({"demo": "1.0"}, old, [], max_age_days=300, now=NOW).warnings == []


# --- the vendored snapshot ------------------------------------------------------------------------

def test_the_vendored_snapshot_is_for_the_current_lock():
    data = advisories.load()
    pins = lock.read_lock()
    assert data["source"]["repository"] == "https://github.com/pypa/advisory-database"
    assert len(data["source"]["commit"]) == 40
    assert datetime.fromisoformat(data["source"]["date"])
    assert set(data["packages"]) == set(pins)
    ids = [a["id"] for a in data["advisories"]]
    assert ids == sorted(ids) and len(ids) == len(set(ids)) and len(ids) > 50
    for item in data["advisories"]:
        assert item["summary"] and all(e["package"] in pins for e in item["affected"])


def test_vendored_entries_evaluate():
    by_id = {a["id"]: a for a in advisories.load()["advisories"]}
    urllib3 = by_id["PYSEC-2023-192"]["affected"][0]            # CVE-2023-43804, two pairs
    assert [affects(urllib3, v) for v in ("1.26.16", "1.26.17", "2.0.5", "2.0.6")] == [True, False, True, False]
    found, problems = audit.find({"urllib3": "2.0.5", "pyspark": "3.3.0"}, list(by_id.values()))
    assert problems == []
    assert {(f.id, f.package) for f in found} >= {("PYSEC-2023-192", "urllib3"), ("PYSEC-2023-44", "pyspark")}


def test_the_repository_lock_passes_its_audit():
    report = audit.audit(lock.read_lock(), advisories.load(), audit.read_accepted(audit.ACCEPTED_FILE))
    assert report.errors == [] and report.failing == []


# --- the refresh from an advisory-database git copy -----------------------------------------------

def git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "GIT_COMMITTER_DATE": "2025-03-04T05:06:07+00:00",
                        "PATH": "/usr/bin:/bin"})


def test_refresh_keeps_only_locked_packages_and_what_the_audit_reads(tmp_path):
    repo = tmp_path / "advisory-database"
    (repo / "vulns" / "PyYAML").mkdir(parents=True)
    (repo / "vulns" / "unlocked").mkdir()
    (repo / "vulns" / "PyYAML" / "PYSEC-2021-1.yaml").write_text(textwrap.dedent("""\
        id: PYSEC-2021-1
        details: |
          PyYAML before 5.10 runs
          code.
        aliases: [CVE-2021-1]
        modified: 2021-07-05T00:01:25.632991Z
        affected:
        - package: {name: PyYAML, ecosystem: PyPI}
          ranges:
          - type: ECOSYSTEM
            events: [{introduced: "0"}, {fixed: 5.10}]
          - type: GIT
            repo: https://github.com/yaml/pyyaml
            events: [{introduced: "0"}, {fixed: abc}]
          versions: [5.1, 5.9, 6.0]
        - package: {name: unlocked, ecosystem: PyPI}
          versions: [1.0]
        references: [{type: WEB, url: "https://example.org"}]
        """))
    (repo / "vulns" / "PyYAML" / "PYSEC-2021-2.yaml").write_text(
        "id: PYSEC-2021-2\nwithdrawn: '2022-01-01T00:00:00Z'\naffected:\n"
        "- package: {name: pyyaml, ecosystem: PyPI}\n  versions: ['1.0']\n")
    (repo / "vulns" / "unlocked" / "PYSEC-2021-3.yaml").write_text(
        "id: PYSEC-2021-3\naffected:\n- package: {name: unlocked, ecosystem: PyPI}\n  versions: ['1.0']\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "advisories")
    built = advisories.build(repo / ".git", ["pyyaml", "requests"])
    assert built["source"]["date"] == "2025-03-04T05:06:07+00:00" and len(built["source"]["commit"]) == 40
    assert built["packages"] == ["pyyaml", "requests"]
    first, withdrawn = built["advisories"]
    assert first == {"id": "PYSEC-2021-1", "aliases": ["CVE-2021-1"], "summary": "PyYAML before 5.10 runs code.",
                     "modified": "2021-07-05T00:01:25.632991Z",
                     # 5.10 stays text (not the float 5.1); GIT ranges and the other package go;
                     # 5.1 and 5.9 are in the range, only 6.0 is listed beyond it
                     "affected": [{"package": "pyyaml",
                                   "ranges": [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": "5.10"}]}],
                                   "versions": ["6.0"]}]}
    assert withdrawn["withdrawn"] == "2022-01-01T00:00:00Z"
    path = tmp_path / "pypi.json"
    path.write_text(advisories.dumps(built))
    assert advisories.load(path) == built
    report = audit.audit({"pyyaml": "5.9", "requests": "2.0"}, built, [], now=NOW)
    assert [(f.id, f.fixed_in) for f in report.findings] == [("PYSEC-2021-1", ["5.10"])]


def test_a_malformed_snapshot_is_refused(tmp_path):
    path = tmp_path / "pypi.json"
    path.write_text(json.dumps({"format": 1, "source": {"date": "2025-01-01"}, "packages": [],
                                "advisories": [{"id": "X"}]}))
    with pytest.raises(advisories.SnapshotError, match="without id or affected"):
        advisories.load(path)


# --- the lock -------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, message", [("demo>=1.0\n", "not name==version"),
                                           ("demo[x]==1.0\n", "not name==version"),
                                           ("-e .\n", "not name==version"),
                                           ("Demo_Pkg==1.0\ndemo-pkg==1.1\n", "demo-pkg is pinned twice")])
def test_the_lock_holds_exact_pins_only(tmp_path, text, message):
    path = tmp_path / "lock"
    path.write_text("# comment\n\n" + text)
    with pytest.raises(lock.LockError, match=message):
        lock.read_lock(path)


def test_closure_follows_extras_and_markers():
    installed = {
        "app-dep": lock.Installed("1.0", ('helper>=1; extra == "fast"', 'legacy; python_version < "3"',
                                          "common")),
        "helper": lock.Installed("2.0", ()),
        "common": lock.Installed("3.0", ('cdckit',)),
        "legacy": lock.Installed("0.1", ()),
    }
    assert lock.closure([Requirement("App_Dep")], installed) == {"app-dep": "1.0", "common": "3.0"}
    assert lock.closure([Requirement("app-dep"), Requirement("app-dep[fast]")], installed) == \
        {"app-dep": "1.0", "common": "3.0", "helper": "2.0"}
    with pytest.raises(lock.LockError, match="needed but not installed .*: missing"):
        lock.closure([Requirement("missing")], installed)


def test_the_lock_pins_every_dependency_of_pyproject():
    own, roots = lock.project_requirements()
    pins = lock.read_lock()
    assert own == "cdckit" and "cdckit" not in pins
    assert {"pyspark", "psycopg-binary", "pytest", "osmem-server", "matplotlib"} <= set(pins)
    for requirement in roots:
        name = lock.canonicalize_name(requirement.name)
        assert requirement.specifier.contains(pins[name], prereleases=True), (name, pins[name])
    assert lock.format_lock(pins).splitlines()[-len(pins):] == [f"{n}=={pins[n]}" for n in sorted(pins)]
