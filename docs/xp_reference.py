"""Writes the reference of ``polyad.xp`` (docs/_generated/xp_*.rst): one row per function with its
docstring's first paragraph and a link to its page in the Array API standard, and autodoc entries for the
special functions (not in the standard: their docstrings are the reference)."""

import pathlib

from polyad import xp
from polyad.core import standard

SPEC = "https://data-apis.org/array-api/{version}/API_specification/generated/array_api.{name}.html"


def _summary(func):
    """The docstring's first paragraph, on one line (a first line alone can cut a literal in two)."""
    paragraph = (func.__doc__ or "").strip().split("\n\n")[0]
    return " ".join(line.strip() for line in paragraph.splitlines())


def _table(title, names, namespace, prefix):
    rows = []
    for name in names:
        func = getattr(namespace, name, None)
        if func is None:
            continue
        url = SPEC.format(version=standard.API_VERSION, name=prefix + name)
        summary = _summary(func).replace("|", "\\|")
        rows.append(f"   * - ``{prefix}{name}``\n     - `standard <{url}>`__\n     - {summary}")
    head = f"{title}\n{'-' * len(title)}\n\n.. list-table::\n   :header-rows: 1\n   :widths: 20 12 68\n\n"
    head += "   * - function\n     - specification\n     - polyad's docstring\n"
    return head + "\n".join(rows) + "\n\n"


def generate(folder):
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    text = _table("Functions", standard.FUNCTIONS, xp, "")
    text += _table("linalg", standard.LINALG, xp.linalg, "linalg.")
    text += _table("fft", standard.FFT, xp.fft, "fft.")
    (folder / "xp_table.rst").write_text(text)
    from polyad.ops import special

    lines = [".. py:module:: polyad.xp.special", ""]
    for name in special.NAMES:
        lines += [f".. autofunction:: polyad.xp.special.{name}", ""]
    (folder / "special_functions.rst").write_text("\n".join(lines))
