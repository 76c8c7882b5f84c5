# settleq developer commands. `make check` runs every gate CI cares about.
PY ?= python

.PHONY: install test lint typecheck check demo openapi bench clean

install:
	$(PY) -m pip install -q -e '.[dev]'

# The test command of the README (and of .ci/run): real PostgreSQL, Redis, RabbitMQ.
test: install
	$(PY) -m pytest

lint:
	ruff check .
	ruff format --check shared services tests
	lint-imports

typecheck:
	mypy shared services

check: lint typecheck test

# The stack plus a demo batch, on the embedded SQLite ledger.
demo:
	$(PY) -m pip install -q -e .
	settleq demo --start-stack

openapi:
	settleq openapi > openapi.yaml

# 500,000 lines end to end on PostgreSQL (make bench ARGS="--lines 20000" for the quick mode).
bench: install
	$(PY) -m bench.run $(ARGS)

clean:
	rm -rf tests/artifacts .pytest_cache .mypy_cache .ruff_cache .import_linter_cache settleq.db settleq.db-* settleq-demo.log
