"""Where `spark.kafka_source: jvm` finds Spark's built-in Kafka source (spark-sql-kafka-0-10 and
its dependencies): the folder named by CDCKIT_SPARK_KAFKA_JARS, else the one `scripts/setup` fills
(`<CDCKIT_JARS_DIR, default .devstack/jars>/spark-kafka`, complete once its stamp is written). The
local stack's tooling writes that folder; the shipped code only reads it."""
from __future__ import annotations

import os
import re
from pathlib import Path

# Jars the pyspark wheel already has (Scala, Hadoop, compression codecs...): a second copy of a
# class on Spark's class path is at best noise and at worst a conflict.
_VERSION = re.compile(r"-\d[\w.]*\.jar$")
STAMP = ".pom-sha256"


def setup_folder() -> Path:
    default = Path(__file__).resolve().parents[2] / ".devstack" / "jars"
    return Path(os.environ.get("CDCKIT_JARS_DIR", default)).resolve() / "spark-kafka"


def kafka_source_jars() -> list[Path]:
    """The jars to add to Spark's class path; [] when none are at hand (an installed cdckit
    without them: `kafka_source: jvm` is then refused by name)."""
    named = os.environ.get("CDCKIT_SPARK_KAFKA_JARS")
    if named:
        folder = Path(named)
    else:
        folder = setup_folder()
        if not (folder / STAMP).is_file():   # not fetched, or a fetch cut short
            return []
    return not_in_wheel(folder)


def not_in_wheel(folder: Path) -> list[Path]:
    import pyspark

    wheel = {_VERSION.sub("", j.name) for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return sorted(j for j in folder.glob("*.jar") if _VERSION.sub("", j.name) not in wheel)
