# Each target sets up its own virtual environment on a fresh machine, then runs.
VENV ?= .venv
PY := $(VENV)/bin/python
BASE := $(VENV)/.installed-base
TEST := $(VENV)/.installed-test
BENCH := $(VENV)/.installed-bench
PYTEST_ARGS ?=

.PHONY: demo test test-numpy test-strict conformance bench lint format info

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(BASE): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e .
	touch $@

$(TEST): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e ".[test]"
	touch $@ $(BASE)

$(BENCH): pyproject.toml $(TEST)
	$(PY) -m pip install -q -e ".[test,bench]"
	touch $@

demo: $(BASE)
	$(PY) scripts/demo.py

test: test-numpy test-strict

test-numpy: $(TEST)
	POLYAD_BACKEND=numpy $(PY) -m pytest -q tests polyad --doctest-modules $(PYTEST_ARGS)

test-strict: $(TEST)
	POLYAD_BACKEND=array_api_strict $(PY) -m pytest -q tests $(PYTEST_ARGS)

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

lint: $(TEST)
	$(PY) -m ruff format --check .
	$(PY) -m ruff check .

format: $(TEST)
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .
