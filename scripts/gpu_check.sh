#!/usr/bin/env bash
# The prepared GPU check: the demo, scripts/bench_gpu.py and the CuPy lane of the test suite, on a machine
# with CuPy and a CUDA GPU, in at most TOTAL_S seconds (default 420), logging as it goes so that a run cut
# short still leaves its results.
#
#   bash scripts/gpu_check.sh              # logs in $OUT (the device tool's folder) or build/gpu_check
#   DRY_RUN=1 PYTHON=.venv/bin/python bash scripts/gpu_check.sh
#       on a CPU: the same steps on NumPy, the lane cut to one small file and bench_gpu.py to its --help
#       (the plumbing only: logs, timeouts, the summary)
#
# Wheels of what the GPU image lacks (array-api-compat, optree, array-api-strict, pytest-timeout) are
# installed from .whl/ if that folder exists (see BENCHMARKS.md, "GPU check", for how it is filled).
# Files written: info.txt (card, driver, versions), demo.log, bench_gpu.log, bench_g6s.log (issue 34's
# per-step table, CUDA graphs off and on: POLYAD_CUDA_GRAPHS), lane.log (one line per test,
# written as each ends), lane_failures.txt (the failed tests with their one-line reasons), summary.txt.
set -u
cd "$(dirname "$0")/.."
LOG=${OUT:-build/gpu_check}
mkdir -p "$LOG"
TOTAL_S=${TOTAL_S:-420}
PY=${PYTHON:-python3}  # the interpreter (PYTHON=.venv/bin/python for a dry run here)
START=$(date +%s)
left() { echo $((TOTAL_S - ($(date +%s) - START))); }

if [ -d .whl ]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/polyad-site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/polyad-site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 POLYAD_BACKEND=cupy XLA_PYTHON_CLIENT_PREALLOCATE=false
LANE_TESTS=tests
BENCH_ARGS=(--budget "${BENCH_BUDGET:-1.5}")
G6S_ARGS=(--workload G6s --budget "${BENCH_BUDGET:-1.5}")
if [ -n "${DRY_RUN:-}" ]; then  # no GPU: the plumbing (logs, timeouts, summary) on NumPy
    export POLYAD_BACKEND=numpy
    LANE_TESTS=tests/test_cuda_driver.py
    BENCH_ARGS=(--help)
    G6S_ARGS=(--workload G6s --quick --help)
fi

{
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "no GPU (no nvidia-smi)"
    "$PY" -c "import sys, numpy, scipy; print(sys.version.split()[0], 'numpy', numpy.__version__, \
'scipy', scipy.__version__)"
    "$PY" -c "import cupy; print('cupy', cupy.__version__)"
    "$PY" -m polyad info
} >"$LOG/info.txt" 2>&1
cat "$LOG/info.txt"

echo "== demo ($POLYAD_BACKEND)"
timeout -k 5 "${DEMO_S:-60}" "$PY" scripts/demo.py --figure "$LOG/demo.png" >"$LOG/demo.log" 2>&1
DEMO_RC=$?
tail -5 "$LOG/demo.log"

echo "== bench_gpu"
timeout -k 5 "${BENCH_S:-120}" "$PY" scripts/bench_gpu.py "${BENCH_ARGS[@]}" >"$LOG/bench_gpu.log" 2>&1
BENCH_RC=$?
cat "$LOG/bench_gpu.log"

echo "== bench_gpu G6s (per step, POLYAD_CUDA_GRAPHS unset and 1)"
timeout -k 5 "${G6S_S:-90}" "$PY" scripts/bench_gpu.py "${G6S_ARGS[@]}" >"$LOG/bench_g6s.log" 2>&1
G6S_RC=$?
cat "$LOG/bench_g6s.log"

LANE_S=$(($(left) - 15))
echo "== lane ($POLYAD_BACKEND), ${LANE_S} s"
# over every core with pytest-xdist (on the GPU image); without it one process, still logging per test
PARALLEL=()
"$PY" -c "import xdist" 2>/dev/null && PARALLEL=(-n "$(nproc)")
timeout -k 10 "$LANE_S" "$PY" -m pytest "$LANE_TESTS" -p no:cacheprovider "${PARALLEL[@]}" -v -rfE --tb=line \
    -o timeout=60 --ignore=tests/interop --ignore=tests/test_dask.py --ignore=tests/test_distributed.py \
    >"$LOG/lane.log" 2>&1
LANE_RC=$?
grep -E "(FAILED|ERROR) tests/" "$LOG/lane.log" | sed 's/^\[gw[0-9]*\] \[ *[0-9]*%\] //' | sort -u \
    >"$LOG/lane_failures.txt"

{
    echo "card: $(head -2 "$LOG/info.txt" | tail -1)"
    echo "demo rc=$DEMO_RC, bench_gpu rc=$BENCH_RC, lane rc=$LANE_RC (124: cut at ${LANE_S} s), bench_g6s rc=$G6S_RC"
    echo "lane: $(grep -cE '(PASSED|XFAIL|XPASS)' "$LOG/lane.log") passed, \
$(grep -c SKIPPED "$LOG/lane.log") skipped, $(grep -cE '^(FAILED|ERROR) ' "$LOG/lane_failures.txt") failed"
    tail -1 "$LOG/lane.log"
    echo "seconds: $(($(date +%s) - START))"
} | tee "$LOG/summary.txt"
