"""Counts of the SciPy/scikit-learn interop table (tests/interop/interop_table.py): rows, cells (a row
under grad, jvp and vmap) and known-failure cells grouped by cause, for this checkout or another.

    python scripts/interop_counts.py [CHECKOUT]

A known failure whose cause says "WITHOUT an error" is a silently wrong value; the table must have none.
"""

import collections
import os
import sys


def main():
    root = os.path.abspath(
        sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    )
    os.environ["SCIPY_ARRAY_API"] = "1"
    sys.path[:0] = [os.path.join(root, "tests", "interop"), os.path.join(root, "tests"), root]
    import interop_table as table

    causes = collections.Counter()
    for row in table.ROWS:
        for fail in (row.known_failures or {}).values():
            causes[(fail.side, fail.cause)] += 1
    silent = sum(n for (_, cause), n in causes.items() if "WITHOUT an error" in cause)
    cells = len(table.ROWS) * len(table.TRANSFORMS)
    print(
        f"{len(table.ROWS)} rows, {cells} cells, {sum(causes.values())} known-failure cells, {silent} silently wrong"
    )
    for (side, cause), n in causes.most_common():
        print(f"  {n:3d}  {side}: {cause[:100]}")


if __name__ == "__main__":
    main()
