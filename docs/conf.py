"""Sphinx configuration of polyad's documentation: ``make docs`` builds it into docs/_build/html.

The build is strict (``-W --keep-going`` in the Makefile, ``nitpicky`` here): a broken cross-reference
or a malformed docstring fails it. Before Sphinx reads the sources, ``xp_reference.generate`` writes the
namespace's table (each function linked to its page in the Array API standard) and
``numpy_coverage.generate`` the NumPy coverage table (from polyad's own NumPy dispatch table) into
docs/_generated/, and the Makefile runs the gallery scripts, whose figures land in docs/_generated/gallery/.
"""

import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import numpy_coverage  # noqa: E402
import xp_reference  # noqa: E402

import polyad  # noqa: E402

project = "polyad"
author = "the polyad developers"
copyright = "2026, the polyad developers"
release = version = polyad.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.doctest",
    "sphinx.ext.viewcode",
    "sphinx.ext.intersphinx",
]
exclude_patterns = ["_build", "_generated/*.rst"]
html_theme = "alabaster"
html_theme_options = {
    "description": "composable function transforms for Array API code",
    "fixed_sidebar": True,
    "page_width": "1180px",
}
html_static_path: list[str] = []

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"members": False, "undoc-members": False}
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False

intersphinx_mapping: dict[str, tuple[str, None]] = {}  # offline: no inventories are fetched

# Strict: every cross-reference must resolve. The only exceptions are Python's own types in signatures
# (typing, collections.abc, types), which would resolve through Python's inventory, not fetched offline
nitpicky = True
nitpick_ignore_regex = [("py:class", r"(typing|collections\.abc|types)\.[A-Za-z]+")]

xp_reference.generate(HERE / "_generated")
# "Coming from NumPy"'s table, from polyad.interop.numpy's tables
numpy_coverage.generate(HERE / "_generated")
