"""What the gallery scripts share: where their figures go, and matplotlib without a display.

A script writes its figure into the folder named by ``--out DIR`` or the ``POLYAD_GALLERY_DIR``
environment variable, else into ``<temp dir>/polyad-gallery`` (never into the repository).
"""

import argparse
import os
import pathlib
import tempfile


def output_dir(description):
    """Parse the script's command line and return the folder its figure goes to (created)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", default=None, help="folder for the figure (default: $POLYAD_GALLERY_DIR, "
                        "else <temp dir>/polyad-gallery)")  # fmt: skip
    args = parser.parse_args()
    folder = args.out or os.environ.get("POLYAD_GALLERY_DIR")
    if not folder:
        folder = os.path.join(tempfile.gettempdir(), "polyad-gallery")
    path = pathlib.Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    return path


def pyplot():
    """matplotlib's pyplot on the Agg backend (files only: the scripts run headless in tests)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, folder, name):
    path = folder / name
    fig.savefig(path, dpi=110, bbox_inches="tight")
    print(f"figure: {path}")
    return path
