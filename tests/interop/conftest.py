"""The interop suite's selection: without a ``-m`` expression naming ``interop`` only the fast subset runs
(rows with ``fast=True``, seconds: what ``make test`` runs); ``-m interop`` runs every row
(``make test-interop``). SCIPY_ARRAY_API is not set here: SciPy reads it once, on its first import, so it
belongs to the process that runs this directory (the Makefile's targets set it), and setting it here
would change what the rest of a combined run sees."""


def pytest_collection_modifyitems(config, items):
    if "interop" in (config.getoption("markexpr") or ""):
        return
    keep = [item for item in items if "interop_full" not in item.keywords]
    if len(keep) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if "interop_full" in item.keywords])
        items[:] = keep
