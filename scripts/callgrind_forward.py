"""Instructions per call of eager forward mode under callgrind (issue 23, item 4):

    python scripts/callgrind_forward.py [--python PATH] [--pythonpath DIR]

Two calls, each overhead-dominated so that the count is the interpreter's work per op: ``pa.jvp`` through
150 element-wise ops on 8 elements (``sin(v) * 1.01 + 0.1``, 50 times) and ``pa.hessian`` of W5's loss at
n = 16. Each runs 20 and 40 times in a child process under ``valgrind --tool=callgrind`` (garbage collector
off, ``PYTHONHASHSEED=0``); the difference over 20 is one call's instructions. ``--pythonpath`` puts
another copy of polyad first (main's code from ``git archive``, to compare in the same session).
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

CHILD = r"""
import gc, sys
import numpy as np
import polyad as pa
from polyad import xp
which, calls = sys.argv[1], int(sys.argv[2])
v8 = np.linspace(0.1, 0.9, 8)
def chain(v):
    for _ in range(50):
        v = xp.sin(v) * 1.01 + 0.1
    return v
rng = np.random.default_rng(2)
A = rng.standard_normal((16, 16)) / 4.0
x = rng.standard_normal(16)
h = pa.hessian(lambda v: xp.sum(xp.log(1 + xp.exp(A @ v))))
f = (lambda: pa.jvp(chain, (v8,), (np.ones(8),))) if which == "jvp" else (lambda: h(x))
for _ in range(5):
    f()
gc.disable()
for _ in range(calls):
    f()
"""


def instructions(python, which, calls, env):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        proc = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                python,
                "-c",
                CHILD,
                which,
                str(calls),
            ],
            env=env,
            cwd=tmp,  # not the checkout: ``-c`` puts the working directory first on sys.path
            capture_output=True,
            text=True,
            check=True,
        )
    return int(re.search(r"Collected : (\d+)", proc.stderr).group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--pythonpath", default=None)
    opts = parser.parse_args()
    env = dict(os.environ, PYTHONHASHSEED="0")
    if opts.pythonpath:
        env["PYTHONPATH"] = opts.pythonpath
    for which, label in (
        ("jvp", "jvp, 150 element-wise ops on 8 elements"),
        ("hessian", "hessian of W5, n = 16"),
    ):
        a = instructions(opts.python, which, 20, env)
        b = instructions(opts.python, which, 40, env)
        print(f"{label}: {(b - a) / 20 / 1e6:.2f}M instructions per call")


if __name__ == "__main__":
    main()
