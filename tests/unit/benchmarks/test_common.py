import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
MAKE = "from benchmarks.common import scratch_dir; d = scratch_dir('cdckit-test-scratch-'); (d / 'f').write_text('x'); print(d)"


def _run(env_extra: dict[str, str]) -> Path:
    env = {k: v for k, v in os.environ.items() if k != "CDCKIT_BENCH_KEEP_TMP"} | env_extra
    out = subprocess.run([sys.executable, "-c", MAKE], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return Path(out.stdout.strip().splitlines()[-1])


def test_a_benchmarks_scratch_folder_goes_when_it_exits_unless_asked_to_stay(tmp_path):
    gone = _run({"TMPDIR": str(tmp_path)})
    assert gone.parent == tmp_path and not gone.exists()
    kept = _run({"TMPDIR": str(tmp_path), "CDCKIT_BENCH_KEEP_TMP": "1"})
    assert (kept / "f").read_text() == "x"
