# Each target sets up its own virtual environment on a fresh machine, then runs.
VENV ?= .venv
PY := $(VENV)/bin/python
BASE := $(VENV)/.installed-base
TEST := $(VENV)/.installed-test
DEMO := $(VENV)/.installed-demo
DOCS := $(VENV)/.installed-docs
BENCH := $(VENV)/.installed-bench
PYTEST_ARGS ?=

.PHONY: docs demo test test-numpy test-numpy-a test-numpy-b test-strict test-strict-a test-strict-b test-dask test-dask-full test-interop conformance bench lint format info

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(BASE): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e .
	touch $@

$(DEMO): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e ".[scipy,plot]"
	touch $@ $(BASE)

# cuda-check: CuPy and NVRTC, with no GPU, for tests/test_cuda_sources.py (every CUDA source compiles)
$(TEST): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e ".[test,jit,cuda-check]"
	touch $@ $(BASE)

$(BENCH): pyproject.toml $(TEST)
	$(PY) -m pip install -q -e ".[test,bench,jit]"
	touch $@

demo: $(DEMO)
	$(PY) scripts/demo.py --figure build/demo/bratu_demo.png

$(DOCS): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e ".[docs]"
	touch $@ $(BASE)

# The documentation (docs/, Sphinx: autodoc + napoleon) into docs/_build/html, strictly: a broken
# reference or a docstring warning fails the build (-E: docstrings read afresh, not from the last build's
# cache). The gallery scripts run first, drawing its figures.
docs: $(DOCS)
	rm -rf docs/_generated
	@for script in examples/[a-z]*.py; do \
		echo "gallery: $$script"; \
		POLYAD_BACKEND=numpy POLYAD_GALLERY_DIR=docs/_generated/gallery $(PY) $$script > /dev/null || exit 1; \
	done
	$(PY) -m sphinx -E -b html -W --keep-going -q -n docs docs/_build/html
	@echo "documentation: $(CURDIR)/docs/_build/html/index.html"

# The numpy, array_api_strict and Dask lanes run as five processes, two at a time (two cores); the
# environment is set up once, before them. The halves were cut by measured durations (CI run of
# 2026-11-28: strict solver files 305 s, the rest of strict 296 s, numpy test_[h-z] with the doctests and
# interop 296 s, the Dask lane 215 s, numpy test_[a-g] 144 s), listed longest first so that each core
# takes the next as it frees (about 11 min of tests; with the Dask lane after the others, 13.5)
test: $(TEST)
	$(MAKE) -j2 --output-sync=target test-strict-a test-strict-b test-numpy-b test-dask test-numpy-a

# SciPy reads SCIPY_ARRAY_API once, when first imported: the interop suite (tests/interop) runs in a
# process of its own with it set, the rest without it; `make test` runs the interop suite's fast subset
INTEROP := SCIPY_ARRAY_API=1 $(PY) -m pytest -q tests/interop

test-numpy: $(TEST)
	POLYAD_BACKEND=numpy $(PY) -m pytest -q tests polyad --doctest-modules --ignore=tests/interop \
		--ignore=tests/test_dask.py $(PYTEST_ARGS)
	POLYAD_BACKEND=numpy $(INTEROP) $(PYTEST_ARGS)

test-strict: $(TEST)
	POLYAD_BACKEND=array_api_strict $(PY) -m pytest -q tests --ignore=tests/interop --ignore=tests/test_dask.py \
		$(PYTEST_ARGS)
	POLYAD_BACKEND=array_api_strict $(INTEROP) $(PYTEST_ARGS)

# the halves `make test` runs (see there); test-numpy and test-strict run a whole lane
SOLVER_TESTS := $(wildcard tests/test_integrate*.py tests/test_bdf*.py tests/test_stiff*.py)
NUMPY_A := $(filter-out tests/test_dask.py,$(wildcard tests/test_[a-g]*.py))

test-strict-a: $(TEST)
	POLYAD_BACKEND=array_api_strict $(PY) -m pytest -q $(SOLVER_TESTS) $(PYTEST_ARGS)

test-strict-b: $(TEST)
	POLYAD_BACKEND=array_api_strict $(PY) -m pytest -q \
		$(filter-out tests/test_dask.py $(SOLVER_TESTS),$(wildcard tests/test_*.py)) $(PYTEST_ARGS)
	POLYAD_BACKEND=array_api_strict $(INTEROP) $(PYTEST_ARGS)

test-numpy-a: $(TEST)
	POLYAD_BACKEND=numpy $(PY) -m pytest -q $(NUMPY_A) --doctest-modules $(PYTEST_ARGS)

test-numpy-b: $(TEST)
	POLYAD_BACKEND=numpy $(PY) -m pytest -q $(filter-out $(NUMPY_A) tests/test_dask.py,$(wildcard tests/test_*.py)) \
		polyad --doctest-modules $(PYTEST_ARGS)
	POLYAD_BACKEND=numpy $(INTEROP) $(PYTEST_ARGS)

# Dask (lazy, chunked arrays) as the default backend: tests/test_dask.py (laziness of every op-table row
# and its transforms, a gradient larger than the process's memory) and the op table's values, shapes and
# first derivatives; `make test-dask-full` runs every op-table check (second order and vmap too: slow)
DASK_OPS := tests/test_ops.py -k "test_value or test_abstract_eval or test_vjp or test_namespace or test_vmap_fallback"

# loops on Dask: a checkpointed scan and a while_loop under every transform (the whole loop file: 2 min)
DASK_LOOPS := "tests/test_loops.py::test_scan_equals_the_unrolled_loop_under_every_transform[4]" \
	"tests/test_loops.py::test_while_loop_equals_the_python_loop[1]" \
	tests/test_loops.py::test_cond_equals_the_python_branch

test-dask: $(TEST)
	POLYAD_BACKEND=dask $(PY) -m pytest -q tests/test_dask.py $(PYTEST_ARGS)
	POLYAD_BACKEND=dask $(PY) -m pytest -q $(DASK_OPS) $(PYTEST_ARGS)
	POLYAD_BACKEND=dask $(PY) -m pytest -q $(DASK_LOOPS) $(PYTEST_ARGS)

test-dask-full: $(TEST)
	POLYAD_BACKEND=dask $(PY) -m pytest -q tests/test_dask.py tests/test_ops.py $(PYTEST_ARGS)

# every row of the SciPy/scikit-learn interop table under grad, jvp and vmap, on both backends
test-interop: $(TEST)
	POLYAD_BACKEND=numpy $(INTEROP) -m interop $(PYTEST_ARGS)
	POLYAD_BACKEND=array_api_strict $(INTEROP) -m interop $(PYTEST_ARGS)

# The official Array API suite (data-apis/array-api-tests, with its array-api submodule) against polyad.xp
# and against namespaces that run every call inside vmap, jvp and vjp (polyad/testing/under_transform.py):
#   make conformance ARRAY_API_TESTS=/path/to/array-api-tests [MODES="eager jvp"] [SUITE_ARGS="-- -k sin"]
conformance: $(TEST)
	@test -d "$(ARRAY_API_TESTS)/array_api_tests" || \
		{ echo "set ARRAY_API_TESTS=/path/to/a checkout of data-apis/array-api-tests"; exit 2; }
	$(PY) -m pip install -q ndindex pytest-json-report
	POLYAD_BACKEND=numpy $(PY) scripts/conformance.py $(ARRAY_API_TESTS) $(MODES) $(SUITE_ARGS)

bench: $(BENCH)
	$(PY) scripts/bench.py $(ARGS)

info: $(BASE)
	$(PY) -m polyad info

# ruff, then mypy over polyad/ (its configuration, and what it checks, in pyproject.toml's [tool.mypy])
lint: $(TEST)
	$(PY) -m ruff format --check .
	$(PY) -m ruff check .
	$(PY) -m mypy

format: $(TEST)
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .
