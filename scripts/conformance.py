"""Run the official Array API conformance suite (data-apis/array-api-tests) against polyad's namespace,
eagerly and with every call inside a transform (``polyad.testing.under_transform``), and compare.

Usage: python scripts/conformance.py /path/to/array-api-tests [MODE ...] [-- PYTEST_ARGS ...]

With the environment variable CONFORMANCE_LOGS set to a folder, each mode's pytest output is written
there (conformance-<mode>.log).

MODE is "polyad" (``polyad.xp`` itself: operators are then the backend library's), or one of the checking
namespaces "eager", "vmap", "jvp", "vjp" (default: all five). For each it prints pytest's summary; then,
for each transform, the failures that eager ("eager", else "polyad") does not also have. The exit status
is 1 when there is such a failure. The suite is a checkout of data-apis/array-api-tests with its
``array-api`` submodule (the spec) in place; it needs hypothesis, ndindex and pytest-json-report.
"""

import os
import re
import subprocess
import sys
import tempfile

DEFAULT_ARGS = ["--max-examples=20", "--hypothesis-seed=0", "--disable-deadline"]
MODES = ("polyad", "eager", "vmap", "jvp", "vjp")
TRANSFORMS = ("vmap", "jvp", "vjp")


def module_for(mode):
    if mode == "polyad":
        return "polyad.xp"
    return f"exec('from polyad.testing.under_transform import {mode} as xp')"


def run(suite, mode, pytest_args, logs=None):
    env = dict(os.environ, ARRAY_API_TESTS_MODULE=module_for(mode), ARRAY_API_TESTS_VERSION="2025.12")
    cmd = [sys.executable, "-m", "pytest", "array_api_tests/", "-q", "-rf", "-p", "no:cacheprovider"]
    with tempfile.TemporaryDirectory() as storage:
        # a fresh example database per run: no failure of an earlier run is replayed into this one
        env["HYPOTHESIS_STORAGE_DIRECTORY"] = storage
        proc = subprocess.run(cmd + pytest_args, cwd=suite, env=env, capture_output=True, text=True)
    lines = proc.stdout.splitlines()
    failed = {m.group(1) for m in map(re.compile(r"^FAILED (.+?)(?: - .*)?$").match, lines) if m}
    summary = next(
        (ln for ln in reversed(lines) if re.search(r"\d+ (passed|failed)", ln)), proc.stdout[-500:]
    )
    if logs:
        with open(os.path.join(logs, f"conformance-{mode}.log"), "w") as f:
            f.write(proc.stdout + proc.stderr)
    return failed, summary.strip("= ")


def main(argv):
    if "--" in argv:
        k = argv.index("--")
        argv, pytest_args = argv[:k], argv[k + 1 :]
    else:
        pytest_args = DEFAULT_ARGS
    if not argv:
        print(__doc__)
        return 2
    suite, modes = argv[0], argv[1:] or list(MODES)
    if not os.path.isdir(os.path.join(suite, "array_api_tests")):
        print(f"{suite} is not a checkout of array-api-tests (no array_api_tests/ in it)")
        return 2
    results = {}
    for mode in modes:
        failed, summary = run(suite, mode, pytest_args, os.environ.get("CONFORMANCE_LOGS"))
        results[mode] = failed
        print(f"{mode:>7}: {summary}", flush=True)
    base = "eager" if "eager" in results else "polyad" if "polyad" in results else None
    status = 0
    for mode in TRANSFORMS:
        if mode not in results or base is None:
            continue
        new = sorted(results[mode] - results[base])
        print(f"{mode:>7}: {len(new)} failure(s) that {base} does not have")
        for test in new:
            print(f"           {test}")
        status |= bool(new)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
