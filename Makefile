# Each target sets up its own virtual environment on a fresh machine, then runs.
VENV ?= .venv
PY := $(VENV)/bin/python
BASE := $(VENV)/.installed-base
TEST := $(VENV)/.installed-test
DEMO := $(VENV)/.installed-demo
BENCH := $(VENV)/.installed-bench
PYTEST_ARGS ?=

.PHONY: demo test test-numpy test-strict test-interop bench lint format info

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(BASE): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e .
	touch $@

$(DEMO): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e ".[scipy]"
	touch $@ $(BASE)

$(TEST): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e ".[test]"
	touch $@ $(BASE)

$(BENCH): pyproject.toml $(TEST)
	$(PY) -m pip install -q -e ".[test,bench]"
	touch $@

demo: $(DEMO)
	$(PY) scripts/demo.py

test: test-numpy test-strict

# SciPy reads SCIPY_ARRAY_API once, when first imported: the interop suite (tests/interop) runs in a
# process of its own with it set, the rest without it; `make test` runs the interop suite's fast subset
INTEROP := SCIPY_ARRAY_API=1 $(PY) -m pytest -q tests/interop

test-numpy: $(TEST)
	POLYAD_BACKEND=numpy $(PY) -m pytest -q tests polyad --doctest-modules --ignore=tests/interop $(PYTEST_ARGS)
	POLYAD_BACKEND=numpy $(INTEROP) $(PYTEST_ARGS)

test-strict: $(TEST)
	POLYAD_BACKEND=array_api_strict $(PY) -m pytest -q tests --ignore=tests/interop $(PYTEST_ARGS)
	POLYAD_BACKEND=array_api_strict $(INTEROP) $(PYTEST_ARGS)

# every row of the SciPy/scikit-learn interop table under grad, jvp and vmap, on both backends
test-interop: $(TEST)
	POLYAD_BACKEND=numpy $(INTEROP) -m interop $(PYTEST_ARGS)
	POLYAD_BACKEND=array_api_strict $(INTEROP) -m interop $(PYTEST_ARGS)

bench: $(BENCH)
	$(PY) scripts/bench.py $(ARGS)

info: $(BASE)
	$(PY) -m polyad info

lint: $(TEST)
	$(PY) -m ruff format --check .
	$(PY) -m ruff check .

format: $(TEST)
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .
