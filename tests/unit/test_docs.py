"""The manual (docs/, mkdocs.yml): the generated reference pages match what their generator makes
now, the site builds strict (a broken link or anchor, a page missing from the nav, a missing
included file fail), and every exit code of pipelines/errors.py is explained in troubleshooting."""
from __future__ import annotations

import difflib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.cli import docs_reference

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("page", sorted(docs_reference.PAGES))
def test_generated_page_is_current(page):
    committed = (ROOT / "docs" / page).read_text()
    made = docs_reference.PAGES[page]()
    diff = "".join(list(difflib.unified_diff(committed.splitlines(True), made.splitlines(True),
                                             f"docs/{page}", "generated"))[:60])
    assert committed == made, (
        f"docs/{page} differs from what the generator makes from the code: run scripts/docs and commit it\n{diff}")


def test_configuration_reference_has_every_field():
    from pipelines.config import Config

    text = (ROOT / "docs" / "configuration.md").read_text()
    for path, model in docs_reference._sections(Config, ""):
        assert f"## `{path}`" in text or not path
        for name, field in model.model_fields.items():
            assert f"| `{field.alias or name}` |" in text, f"{path}.{name} is missing from docs/configuration.md"


def test_mkdocs_builds_strict(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                           "-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "troubleshooting" / "index.html").exists()


def test_every_exit_code_is_explained():
    from pipelines import errors

    codes = {0, 1, 130}
    todo = [errors.CdckitError]
    while todo:
        cls = todo.pop()
        codes.add(cls.exit_code)
        todo.extend(cls.__subclasses__())
    table = (ROOT / "docs" / "troubleshooting.md").read_text().split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    explained = {int(m) for m in re.findall(r"^\| (\d+) \|", table, re.M)}
    assert codes <= explained, f"exit codes missing from docs/troubleshooting.md: {sorted(codes - explained)}"


def test_front_page_reaches_the_exit_codes_in_one_click():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    assert "(docs/troubleshooting.md#exit-codes)" in readme
    for link in re.findall(r"\]\(((?:docs/)?[\w./-]+\.md)(?:#[\w-]+)?\)", readme):
        assert (ROOT / link).exists(), f"README.md links to {link}, which does not exist"
