# settleq developer commands. `make check` runs every gate CI cares about.
PY ?= python
# The lock: every runtime and dev dependency pinned (Python 3.11, Linux). `make
# install`, CI (through it) and docker/Dockerfile install with it as constraints,
# so every machine runs the versions CI ran. `make lock` re-resolves it.
LOCK := constraints.txt

.PHONY: install lock test lint typecheck audit check demo openapi bench clean cluster cluster-stop

install:
	$(PY) -m pip install -q -c $(LOCK) -e '.[dev]'

# The newest versions that satisfy pyproject.toml today, from the public index
# only (uv reads no pip configuration, so no local index or path is recorded).
# pip itself (pip-audit needs it) is left out: the lock pins what pip installs,
# not the pip that installs it. Commit the result once `make check` passes on it.
lock:
	$(PY) -m uv pip compile pyproject.toml --all-extras --upgrade \
		--python-version 3.11 --python-platform linux --no-emit-package pip \
		--custom-compile-command 'make lock' --output-file $(LOCK)

# The test command of the README (and of .ci/run): real PostgreSQL, Redis, RabbitMQ.
# Three steps. The main suite runs on TEST_WORKERS pytest-xdist workers (most
# tests wait on the services, so more workers than cores pay); every test makes
# its own database, queue prefix and Redis keys, each worker has its own Redis
# database, and a file's tests stay on one worker (--dist loadfile: they share
# its fixtures). Then the `serial` tests, which stop the machine's RabbitMQ or
# time paused processes, apart from the rest of the suite, and beside them the
# cluster suite (tests/cluster, marker `cluster`: root, network namespaces, and
# a three-node RabbitMQ, Redis, PostgreSQL and pg_auto_failover formation of its
# own, so it shares nothing with them). Both mostly wait (fault pauses, a 60 s
# link cut, promotions, heartbeats), so side by side they take little more than
# the longer one (~5 min); beside the main suite, the cluster suite's claims
# slowed it and made its load-bound tests flaky; its output is printed after theirs (and kept in
# tests/artifacts/cluster.log). A failure in any step fails the target.
TEST_WORKERS ?= 4
CLUSTER_LOG := tests/artifacts/cluster.log
test: install
	$(PY) -m pytest -m "not cluster and not serial" -n $(TEST_WORKERS) --dist loadfile
	@mkdir -p $(dir $(CLUSTER_LOG))
	$(PY) -m pytest -m cluster tests/cluster >$(CLUSTER_LOG) 2>&1 & cluster=$$!; \
	$(PY) -m pytest -m "serial and not cluster"; serial=$$?; \
	wait $$cluster; cluster=$$?; \
	echo "--- the cluster suite, run beside the serial tests ($(CLUSTER_LOG)):"; \
	cat $(CLUSTER_LOG); \
	test $$serial -eq 0 && test $$cluster -eq 0

lint:
	ruff check .
	ruff format --check shared services tests
	lint-imports

typecheck:
	mypy shared services

# Known vulnerabilities of the lock's pins (PyPI's advisory data). Only in
# `make check`, never in `make test`: CI must not go red because an advisory was
# published overnight. A finding is fixed by bumping the pin (`make lock`); one
# with no fixed release is accepted here, one `--ignore-vuln ID` with its reason
# in a comment above this line, for both commands (none today).
AUDIT_IGNORE :=
# pip-audit reads PyPI's per-release pages; where they are not served (404 on
# this project's machines) it skips every pin, so .ci/audit_lock.py audits each
# pin that is its project's latest release from the project's page as well.
audit:
	pip-audit --requirement $(LOCK) --no-deps --progress-spinner off $(AUDIT_IGNORE)
	$(PY) .ci/audit_lock.py $(LOCK) $(AUDIT_IGNORE)

check: lint typecheck audit test

# The stack plus a demo batch, on the embedded SQLite ledger.
demo:
	$(PY) -m pip install -q -c $(LOCK) -e .
	settleq demo --start-stack

openapi:
	settleq openapi > openapi.yaml

# 500,000 lines end to end on PostgreSQL (make bench ARGS="--lines 20000" for the quick mode).
bench: install
	$(PY) -m bench.run $(ARGS)

# A three-node RabbitMQ cluster of its own (sqc1..3@localhost on 5681-5683, never the
# machine's rabbit@localhost): prints the SETTLEQ_BROKER_URL to use, `;`-separated.
# `make cluster CLUSTER_ARGS="--bind 10.0.0.5"`; scripts/rabbitmq-cluster --help for the rest.
CLUSTER_ARGS ?=
cluster:
	scripts/rabbitmq-cluster $(CLUSTER_ARGS) start

# Stops the three nodes and removes their data (scripts/rabbitmq-cluster stop keeps it).
cluster-stop:
	scripts/rabbitmq-cluster $(CLUSTER_ARGS) stop --purge

clean:
	rm -rf tests/artifacts .pytest_cache .mypy_cache .ruff_cache .import_linter_cache settleq.db settleq.db-* settleq-demo.log
