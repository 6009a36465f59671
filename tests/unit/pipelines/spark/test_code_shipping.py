"""The project's code as the zip executors import it from."""
import subprocess
import sys
import zipfile

from pipelines.spark.code_shipping import PACKAGES, build_archive, project_root


def test_the_archive_holds_every_module_and_imports_without_the_checkout(tmp_path):
    path = build_archive(into=tmp_path)
    names = zipfile.ZipFile(path).namelist()
    root = project_root()
    for package in PACKAGES:
        expected = {p.relative_to(root).as_posix() for p in (root / package).rglob("*.py")
                    if "__pycache__" not in p.parts}
        assert expected <= set(names)
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    # A Python that only has the zip (and the dependencies) imports the executor-side modules from it.
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import pipelines.rebuild.spark_jobs as m; "
            "print(m.__file__)")
    out = subprocess.run([sys.executable, "-I", "-c", code, str(path)], capture_output=True, text=True,
                         cwd=tmp_path, env={"PYTHONPATH": ""})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith(str(path))


def test_the_same_tree_gives_the_same_archive(tmp_path):
    a, b = build_archive(into=tmp_path / "a"), build_archive(into=tmp_path / "b")
    assert a.name == b.name and a.read_bytes() == b.read_bytes()
