"""The documentation covers the public API: every name polyad exports has an entry in the reference
(docs/api/*.rst), so a new public function cannot be left out of it silently. (``make docs`` builds the
pages strictly; this test only reads them, so it runs without Sphinx.)"""

import pathlib
import re

import polyad as pa

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"


def _documented():
    text = "\n".join(p.read_text() for p in sorted((DOCS / "api").glob("*.rst")))
    # ".. autofunction:: grad", ".. autoclass:: polyad.Graph", ".. automodule:: polyad.random", ...
    names = set()
    for target in re.findall(r"^\.\. (?:auto\w+|py:\w+):: +([\w.]+)", text, flags=re.M):
        names.add(target.split(".")[-1])
        names.add(target.removeprefix("polyad."))
    return names


def test_every_export_has_a_reference_entry():
    missing = sorted(set(pa.__all__) - _documented())
    assert not missing, f"exported by polyad but absent from docs/api/*.rst: {missing}"


def test_every_page_is_in_the_table_of_contents():
    index = (DOCS / "index.rst").read_text()
    pages = [p.relative_to(DOCS).with_suffix("").as_posix() for p in DOCS.rglob("*.rst")]
    pages = [p for p in pages if not p.startswith(("_", "index"))]
    absent = [p for p in pages if not re.search(rf"^\s+{re.escape(p)}$", index, flags=re.M)]
    assert not absent, f"pages missing from docs/index.rst's toctree: {absent}"
