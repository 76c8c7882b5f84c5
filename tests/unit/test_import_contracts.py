"""The import contracts of pyproject.toml ([tool.importlinter]) hold.

``make check`` runs ``lint-imports`` itself; this test runs it too, so ``make
test`` (and so CI) fails when a change breaks a layer: the domain importing an
adapter or an I/O library, the API importing the worker, the worker the relay.
It runs in a child process on this checkout's own packages (PYTHONPATH), never
on whichever copy an editable install points at.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = "from importlinter.cli import lint_imports_command; lint_imports_command()"


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [sys.executable, "-c", LINT_IMPORTS, "--no-cache", str(root / "pyproject.toml")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def lint_a_copy_importing(
    tmp_path: Path, module: str, line: str
) -> subprocess.CompletedProcess[str]:
    """``lint_imports`` over a copy of the tree in which ``module`` (a path
    under the root) ends with one more import, ``line``."""
    for name in ("shared", "services"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    path = tmp_path / module
    path.write_text(path.read_text() + f"\n{line}  # noqa: E402,F401\n")
    return lint_imports(tmp_path)


def test_the_contracts_are_the_layers_of_the_project() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    by_name = {contract["name"]: contract for contract in config["contracts"]}
    # The project's three: the first contract of each type (the features'
    # contracts within the API and the database follow them).
    contracts: dict[str, dict[str, Any]] = {}
    for contract in config["contracts"]:
        contracts.setdefault(contract["type"], contract)
    assert set(contracts) == {"forbidden", "independence", "layers"}
    assert len(by_name) == len(config["contracts"])  # each contract named once
    forbidden = contracts["forbidden"]
    assert forbidden["source_modules"] == ["shared.domain"]
    assert {"shared.adapters", "services", "sqlalchemy", "redis", "fastapi", "gc"} <= set(
        forbidden["forbidden_modules"]
    )
    assert config["include_external_packages"] is True  # else sqlalchemy etc. go unseen
    assert {"services.api", "services.worker"} <= set(contracts["independence"]["modules"])
    assert contracts["layers"]["layers"] == ["services", "shared.adapters", "shared.domain"]


def test_the_webhooks_process_may_import_nothing_of_the_api() -> None:
    """Not just the API's app and routes: its whole package. The wire shapes
    both send are shared.wire's, and shared.wire imports no service and no adapter."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    forbidding = {
        source: [c for c in config["contracts"] if c.get("source_modules") == [source]]
        for source in ("services.webhooks", "shared.wire")
    }
    assert [len(found) for found in forbidding.values()] == [1, 1]
    assert {"services.api", "services.worker", "services.relay"} <= set(
        forbidding["services.webhooks"][0]["forbidden_modules"]
    )
    assert {"services", "shared.adapters", "sqlalchemy"} <= set(
        forbidding["shared.wire"][0]["forbidden_modules"]
    )


def test_every_import_contract_is_kept() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout, result.stdout


def test_a_domain_module_importing_sqlalchemy_breaks_the_contracts(tmp_path: Path) -> None:
    """The contracts are not vacuous: a copy of the tree with one bad import fails."""
    result = lint_a_copy_importing(tmp_path, "shared/domain/money.py", "import sqlalchemy")
    assert result.returncode != 0, result.stdout
    assert "shared.domain is pure" in result.stdout and "BROKEN" in result.stdout, result.stdout
    assert "shared.domain.money -> sqlalchemy" in result.stdout, result.stdout


def test_the_dispute_queue_reaching_into_the_ledger_breaks_the_contracts(tmp_path: Path) -> None:
    """A resolution books its rows through the ledger's public face: a dispute
    module importing one of the ledger's modules (its outbox writer) fails."""
    result = lint_a_copy_importing(
        tmp_path,
        "shared/adapters/db/disputes/resolve.py",
        "from shared.adapters.db.ledger.writer import write_outbox",
    )
    assert result.returncode != 0, result.stdout
    assert "use the ledger only through its public face" in result.stdout, result.stdout
    assert "shared.adapters.db.disputes.resolve -> shared.adapters.db.ledger.writer" in (
        result.stdout
    ), result.stdout


def test_the_ledgers_read_side_is_forbidden_every_module_of_its_writer() -> None:
    """Every module of the ledger package but its read side and its face is the
    writer's: one added later is forbidden to the read side as well, or this
    test names it."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    [contract] = [
        c
        for c in config["contracts"]
        if c.get("source_modules") == ["shared.adapters.db.ledger.read"]
    ]
    assert contract["type"] == "forbidden" and not contract.get("allow_indirect_imports")
    ledger = ROOT / "shared" / "adapters" / "db" / "ledger"
    writer = {
        f"shared.adapters.db.ledger.{p.stem if p.is_file() else p.name}"
        for p in ledger.iterdir()
        if p.name not in ("__init__.py", "read", "__pycache__")
        and (p.suffix == ".py" or (p / "__init__.py").exists())
    }
    assert set(contract["forbidden_modules"]) == writer


def test_the_read_side_importing_the_writer_breaks_the_contracts(tmp_path: Path) -> None:
    """The read side's contract is not vacuous: a history module importing one
    of the writer's modules fails."""
    result = lint_a_copy_importing(
        tmp_path,
        "shared/adapters/db/ledger/read/history.py",
        "from shared.adapters.db.ledger.priors import Prior",
    )
    assert result.returncode != 0, result.stdout
    assert "The ledger's read side never imports its writer" in result.stdout, result.stdout
    assert "shared.adapters.db.ledger.read.history -> shared.adapters.db.ledger.priors" in (
        result.stdout
    ), result.stdout


def test_the_cli_and_the_supervisor_are_under_contract() -> None:
    """Every folder of client commands is held to the HTTP API (one added later
    too, or this test names it); no process imports the CLI; the supervisor
    imports nothing of what it runs."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    by_name = {contract["name"]: contract for contract in config["contracts"]}
    client = by_name[
        "The client commands use the HTTP API: no database, no Redis, no process's code"
    ]
    commands = ROOT / "services" / "commands"
    folders = {f"services.commands.{p.parent.name}" for p in commands.glob("*/__init__.py")}
    assert set(client["source_modules"]) == folders
    assert {"shared.adapters.db", "sqlalchemy", "services.api", "services.worker"} <= set(
        client["forbidden_modules"]
    )
    no_cli = by_name["No process imports the CLI"]
    processes = {
        f"services.{p.parent.name}"
        for p in (ROOT / "services").glob("*/__init__.py")
        if p.parent.name != "commands"
    }
    assert processes | {"shared"} == set(no_cli["source_modules"])
    supervisor = by_name["The supervisor knows nothing of what its children run"]
    assert {"services.worker", "services.commands", "shared.adapters"} <= set(
        supervisor["forbidden_modules"]
    )


def test_a_client_command_reading_the_database_breaks_the_contracts(tmp_path: Path) -> None:
    """The CLI's contract is not vacuous: a dispute command reading the queue's
    tables itself, rather than asking the API, fails."""
    result = lint_a_copy_importing(
        tmp_path,
        "services/commands/repair/disputes.py",
        "from shared.adapters.db.disputes import reads",
    )
    assert result.returncode != 0, result.stdout
    assert "The client commands use the HTTP API" in result.stdout, result.stdout
    assert "services.commands.repair.disputes -> shared.adapters.db.disputes.reads" in (
        result.stdout
    ), result.stdout
