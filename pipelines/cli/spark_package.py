"""`cdckit spark-package DIR`: what `spark-submit` needs to run cdckit on YARN or Kubernetes: the
project's code as a zip for `--py-files` and a main file that runs the `cdckit` command line."""
from __future__ import annotations

from pathlib import Path

import click

from pipelines.cli.base import app, say

MAIN_FILE = "cdckit_submit.py"
MAIN = '''"""The cdckit command line as spark-submit's main file: spark-submit [options] cdckit_submit.py run -c cdckit.yaml"""
from pipelines.cli.main import entry

entry()
'''


@app.command("spark-package")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
def spark_package(folder: Path) -> None:
    """Write the code zip and the main file for spark-submit into FOLDER, and the command to run."""
    from pipelines.spark.code_shipping import build_archive

    folder.mkdir(parents=True, exist_ok=True)
    archive = build_archive(into=folder)
    main = folder / MAIN_FILE
    main.write_text(MAIN)
    say(f"wrote {archive} and {main}")
    say(f"  spark-submit --master <yarn|k8s://...> --py-files {archive} [--archives env.tar.gz#env "
        f"--conf spark.pyspark.python=./env/bin/python] {main} run -c cdckit.yaml")
