"""scripts/gpu_check.sh, the prepared GPU check, on a CPU: its syntax, and (slow) its dry run, the same
steps on NumPy with the lane cut to one file, which must leave every log and a summary that counts the
lane's tests."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu_check.sh"
needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


@needs_bash
def test_the_script_parses():
    done = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


@needs_bash
@pytest.mark.slow
def test_the_dry_run_leaves_every_log_and_a_summary(tmp_path):
    env = dict(os.environ, DRY_RUN="1", PYTHON=sys.executable, OUT=str(tmp_path), TOTAL_S="240")
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=env, check=False,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    logs = {p.name for p in tmp_path.iterdir()}
    assert {"info.txt", "demo.log", "bench_gpu.log", "bench_g6s.log", "lane.log", "lane_failures.txt",
            "summary.txt"} <= logs  # fmt: skip
    summary = (tmp_path / "summary.txt").read_text()
    assert "demo rc=0, bench_gpu rc=0, lane rc=0" in summary and "bench_g6s rc=0" in summary, summary
    # one log line per test of the lane's file, counted by the summary as pytest counts them
    lane = (tmp_path / "lane.log").read_text()
    passed = lane.count(" PASSED")
    assert passed > 0 and f"lane: {passed} passed" in summary and f"{passed} passed" in lane.splitlines()[-1]
    assert "CUDA:" in (tmp_path / "info.txt").read_text()  # python -m polyad info's wheel advice
