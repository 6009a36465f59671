import tomllib
from pathlib import Path

from pipelines.cli.main import main

ROOT = Path(__file__).resolve().parents[4]


def test_version_is_the_projects(capsys):
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"cdckit {version}"
