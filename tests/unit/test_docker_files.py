"""docker/: the compose stack and the image, checked structurally (no Docker engine needed).

Commands are parsed by the real command line (typer's click group) and every
``SETTLEQ_*`` name must be a field of the settings object, so neither can
drift from the code.
"""

from __future__ import annotations

import http.server
import re
import shlex
import shutil
import subprocess
import sys
import threading
import tomllib
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml

from services.commands import healthcheck
from services.commands.cli import app
from shared.adapters.db.contracts import put_contract
from shared.adapters.db.engine import make_engine
from shared.adapters.db.migrate import upgrade
from shared.config.files import VARIABLES
from shared.config.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker" / "compose.yaml"
DOCKERFILE = ROOT / "docker" / "Dockerfile"
SETTLEQ_SERVICES = {"migrate", "api", "worker-fast", "worker-heavy", "relay", "webhooks"}
SETTING_NAMES = {f"SETTLEQ_{name.upper()}" for name in Settings.model_fields} | {
    "SETTLEQ_CONFIG",
    *VARIABLES,
}
# docs/operations.md#configuration: the stable names a deployment sets.
SPEC_NAMES = {
    "SETTLEQ_DATABASE_URL",
    "SETTLEQ_BROKER_URL",
    "SETTLEQ_REDIS_URL",
    "SETTLEQ_QUEUE_PREFIX",
    "SETTLEQ_MAX_QUEUE_DEPTH",
    "SETTLEQ_PRODUCER_KEYS",
    "SETTLEQ_VIEWER_TOKENS",
    "SETTLEQ_OPERATOR_TOKENS",
    "SETTLEQ_INTERNAL_SIGNING_KEY",
    "SETTLEQ_MAX_BODY_BYTES",
    "SETTLEQ_CONFIG",
}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = compose["services"]
    return found


def cli() -> Any:
    """The command line's command group (typer builds it on its own copy of click)."""
    return typer.main.get_command(app)


def parse_command(args: list[str]) -> Any:
    """Parse a settleq command line as the CLI would (unknown options raise)."""
    group = cli()
    name, *rest = args
    command = group.commands.get(name)
    assert command is not None, f"settleq has no command {name!r}"
    return command.make_context(name, list(rest))


def test_the_stack_has_its_nine_services(services: dict[str, Any]) -> None:
    # Plus Prometheus, scraping the API and the workers with the alert rules.
    assert set(services) == {"postgres", "redis", "rabbitmq", "prometheus"} | SETTLEQ_SERVICES


def test_settleq_services_run_real_commands_of_one_image(services: dict[str, Any]) -> None:
    for name in SETTLEQ_SERVICES:
        service = services[name]
        assert service["build"]["dockerfile"] == "docker/Dockerfile", name
        assert (COMPOSE.parent / service["build"]["context"] / "pyproject.toml").exists()
        parse_command(service["command"])
    for name, tier in (
        ("worker-fast", "fast_path"),
        ("worker-heavy", "compute_heavy"),
        ("webhooks", "webhooks"),
    ):
        assert parse_command(services[name]["command"]).params["queues"] == tier
        assert parse_command(services[name]["command"]).params["metrics_port"] == 9191
    assert parse_command(services["api"]["command"]).params["port"] == 8000
    assert services["migrate"]["command"] == ["migrate"]
    assert services["relay"]["command"] == ["relay"]


def test_every_setting_name_is_a_real_setting(services: dict[str, Any]) -> None:
    for name in SETTLEQ_SERVICES:
        env = services[name]["environment"]
        used = {key for key in env if key.startswith("SETTLEQ_")}
        assert used <= SETTING_NAMES, (name, used - SETTING_NAMES)
        assert {"SETTLEQ_DATABASE_URL", "SETTLEQ_BROKER_URL", "SETTLEQ_REDIS_URL"} <= used
        assert env["SETTLEQ_DATABASE_URL"].startswith("postgresql://")
    assert SPEC_NAMES <= SETTING_NAMES


def test_health_checks_and_start_order(services: dict[str, Any]) -> None:
    def check(name: str) -> str:
        return " ".join(services[name]["healthcheck"]["test"])

    assert "pg_isready" in check("postgres")
    assert "rabbitmq-diagnostics" in check("rabbitmq") and "ping" in check("rabbitmq")
    assert "redis-cli ping" in check("redis")
    assert (
        check("api") == "CMD python -m services.commands.healthcheck"
    )  # /healthz, keys, contracts
    assert services["migrate"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    for name in SETTLEQ_SERVICES - {"migrate"}:
        assert services[name]["depends_on"] == {
            "migrate": {"condition": "service_completed_successfully"},
            "rabbitmq": {"condition": "service_healthy"},
            "redis": {"condition": "service_healthy"},
        }, name
    # The image's HEALTHCHECK probes the API, which the others do not serve: each
    # has its own (a one-shot migration has nothing to probe).
    assert services["migrate"]["healthcheck"] == {"disable": True}
    assert "9191" in check("worker-fast") and "9191" in check("worker-heavy")
    assert "9191" in check("webhooks")
    assert "/proc/1/stat" in check("relay")


@pytest.mark.regression
def test_every_service_has_a_restart_policy_and_a_health_check(services: dict[str, Any]) -> None:
    """Issue 12 item 1: a service that dies is restarted by compose, and every
    long-running one has a real probe (workers and the relay had none)."""
    for name, service in services.items():
        assert service.get("restart") in ("unless-stopped", "always", "on-failure:5"), name
        check = service.get("healthcheck")
        assert check, name
        if name == "migrate":  # a one-shot job: retried on failure, never restarted once done
            assert service["restart"].startswith("on-failure") and check == {"disable": True}
            continue
        assert check.get("disable") is not True and check["test"][0] == "CMD", name
        assert {"interval", "timeout", "retries"} <= set(check), name


def _python_probe(service: dict[str, Any]) -> str:
    test = service["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python", "-c"]
    return str(test[3])


def test_worker_probe_passes_on_any_http_answer_and_fails_without_one(
    services: dict[str, Any],
) -> None:
    probe = _python_probe(services["worker-fast"])
    assert probe == _python_probe(services["worker-heavy"])

    class Refuse(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # a worker's /metrics without a token: 401
            self.send_response(401)
            self.end_headers()

        def log_message(self, *_: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert _run(probe.replace("9191", str(port))) == 0
    finally:
        server.shutdown()
        server.server_close()
    assert _run(probe.replace("9191", str(port))) != 0  # nothing listens any more


def test_relay_probe_passes_for_a_running_process(services: dict[str, Any]) -> None:
    probe = _python_probe(services["relay"])
    assert _run(probe.replace("/proc/1/stat", "/proc/self/stat")) == 0


def _run(code: str) -> int:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=30).returncode


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1])
        for line in lines
        if line and not line.startswith("#")
    ]


def test_dockerfile_is_slim_non_root_and_probes_the_api() -> None:
    steps = dockerfile_instructions()
    assert steps[0] == ("FROM", "python:3.11-slim")
    users = [arg for op, arg in steps if op == "USER"]
    assert users and users[-1] not in ("root", "0")
    [healthcheck] = [arg for op, arg in steps if op == "HEALTHCHECK"]
    assert "/healthz" in healthcheck
    [entrypoint] = [arg for op, arg in steps if op == "ENTRYPOINT"]
    assert entrypoint == '["settleq"]'
    [cmd] = [arg for op, arg in steps if op == "CMD"]
    parse_command(yaml.safe_load(cmd))
    env_names = set(
        re.findall(r"\b(SETTLEQ_[A-Z_]+)=", " ".join(a for o, a in steps if o == "ENV"))
    )
    assert env_names and env_names <= SETTING_NAMES


def test_image_copies_every_package_and_the_build_context_lets_them_through() -> None:
    steps = dockerfile_instructions()
    copied = {src for op, arg in steps if op == "COPY" for src in shlex.split(arg)[:-1]}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = {p.rstrip("*") for p in project["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert packages | {"pyproject.toml", "README.md"} <= copied
    allowed = {
        line[1:].rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    }
    assert copied <= allowed
    assert any(
        op == "RUN" and re.search(r"\bpip install --no-deps \.(\s|$)", arg) for op, arg in steps
    )


def _lock() -> str:
    lock = re.search(r"^LOCK := (\S+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert lock is not None
    return lock[1]


def _index(steps: list[tuple[str, str]], op: str, pattern: str) -> int:
    found = [i for i, (o, arg) in enumerate(steps) if o == op and re.search(pattern, arg)]
    assert found, (op, pattern)
    return found[0]


def test_image_installs_the_runtime_with_the_lock_as_constraints() -> None:
    """Issue 13 item 5: the image runs the versions CI ran (Makefile's LOCK)."""
    lock = _lock()
    steps = dockerfile_instructions()
    deps = _index(steps, "RUN", rf"\bpip install -c {re.escape(lock)} -r ")
    copied = {src for op, arg in steps if op == "COPY" for src in shlex.split(arg)[:-1]}
    assert lock in copied  # and so let through by .dockerignore (the test above)
    assert _index(steps, "COPY", re.escape(lock)) < deps


@pytest.mark.regression
def test_image_installs_the_dependencies_before_it_copies_the_sources(tmp_path: Path) -> None:
    """Issue 15 item 6: a code edit must not reinstall every dependency. The
    dependencies' layer comes before any source is copied, and the package is
    then installed without them."""
    steps = dockerfile_instructions()
    deps = _index(steps, "RUN", r"\bpip install -c \S+ -r ")
    first_source = min(_index(steps, "COPY", rf"^{name}\b") for name in ("shared", "services"))
    package = _index(steps, "RUN", r"\bpip install --no-deps \.")
    assert deps < first_source < package
    # Only the project's metadata and the lock are in the build context by then.
    before = {src for op, arg in steps[:deps] if op == "COPY" for src in shlex.split(arg)[:-1]}
    assert before == {"pyproject.toml", "README.md", _lock()}
    # Every pip install but the package's own is constrained by the lock.
    for op, arg in steps:
        if op == "RUN" and "pip install" in arg and "--no-deps" not in arg:
            assert f"-c {_lock()}" in arg, arg
    # The requirements the step writes are exactly pyproject's dependencies.
    [extract] = re.findall(r'python -c "(.+?)" > (\S+)', steps[deps][1])
    code = extract[0].replace("\\\\", "\\")  # the shell's double quotes unescape \\
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert out == project["project"]["dependencies"]


@pytest.mark.regression
def test_compose_mounts_only_files_a_fresh_clone_has(compose: dict[str, Any]) -> None:
    """Issue 15 item 6: a bind mount of a file the clone lacks makes Docker
    create a directory there (prometheus/viewer-token did)."""
    tracked = set(
        subprocess.run(
            ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.splitlines()
    )
    for name, service in compose["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith("."):
                path = (COMPOSE.parent / source).resolve().relative_to(ROOT)
                assert str(path) in tracked, (name, volume)
    # The token reaches Prometheus as a config generated from the environment.
    [config] = compose["services"]["prometheus"]["configs"]
    assert config["target"] == "/etc/prometheus/viewer-token"
    assert compose["configs"][config["source"]] == {"content": "${SETTLEQ_PROMETHEUS_TOKEN:-}"}
    prometheus = yaml.safe_load((COMPOSE.parent / "prometheus" / "prometheus.yml").read_text())
    files = {job["authorization"]["credentials_file"] for job in prometheus["scrape_configs"]}
    assert files == {config["target"]}


@pytest.mark.regression
def test_prometheus_finds_every_worker_replica_by_dns(services: dict[str, Any]) -> None:
    """Issue 15 item 6: one static target per tier missed the replicas."""
    prometheus = yaml.safe_load((COMPOSE.parent / "prometheus" / "prometheus.yml").read_text())
    jobs = prometheus["scrape_configs"]
    [workers] = [job for job in jobs if job["job_name"] == "settleq-workers"]
    assert "static_configs" not in workers
    [dns] = workers["dns_sd_configs"]
    # The webhooks component is a Dramatiq worker too, with the same metrics port.
    workers_in_compose = {n for n in services if n.startswith("worker-") or n == "webhooks"}
    assert set(dns["names"]) == workers_in_compose and dns["type"] == "A"
    for name in workers_in_compose:
        assert parse_command(services[name]["command"]).params["metrics_port"] == dns["port"]
        assert services[name].get("deploy", {}).get("replicas", 1) >= 1
        assert "container_name" not in services[name]  # a fixed name cannot scale


@pytest.mark.regression
def test_the_api_is_not_healthy_without_keys_and_contracts(
    services: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 15 item 6: compose came up "healthy" with no keys and no contracts."""
    assert services["api"]["healthcheck"]["test"] == [
        "CMD",
        "python",
        "-m",
        "services.commands.healthcheck",
    ]

    class Ok(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()

        def log_message(self, *_: Any) -> None:
            pass

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    upgrade(url)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    healthz = f"http://127.0.0.1:{server.server_address[1]}/healthz"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    key = [{"key_id": "k1", "secrets": ["s" * 32], "partitions": ["*"]}]
    try:
        bare = Settings(database_url=url)
        assert healthcheck.problem(bare, healthz) == healthcheck.NO_KEYS
        keyed = Settings(database_url=url, producer_keys=key)
        assert healthcheck.problem(keyed, healthz) == healthcheck.NO_CONTRACTS
        engine = make_engine(url)
        put_contract(engine, "promo", "p1", 1, {"rate": "0.1"})
        engine.dispose()
        assert healthcheck.problem(keyed, healthz) is None
    finally:
        server.shutdown()
        server.server_close()
    assert str(healthcheck.problem(keyed, healthz)).startswith("the API does not answer")
    # The probe's own exit: 1 with one line naming the fix.
    monkeypatch.setenv("SETTLEQ_DATABASE_URL", url)
    monkeypatch.delenv("SETTLEQ_PRODUCER_KEYS", raising=False)
    result = subprocess.run(
        [sys.executable, "-m", "services.commands.healthcheck"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("unhealthy: ") and len(result.stderr.splitlines()) == 1


@pytest.mark.regression
def test_the_api_is_healthy_with_a_key_created_at_runtime_and_none_in_its_environment(
    tmp_path: Path,
) -> None:
    """Issue 42 #15: keys live in the database too; the probe counted only
    SETTLEQ_PRODUCER_KEYS', and called a stack whose keys were all created at
    runtime unhealthy; a revoked one is none."""
    import datetime as dt

    from shared.adapters.db.operators import producer_keys

    class Ok(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()

        def log_message(self, *_: Any) -> None:
            pass

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    upgrade(url)
    engine = make_engine(url)
    put_contract(engine, "promo", "p1", 1, {"rate": "0.1"})
    now = dt.datetime.now(dt.UTC)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    healthz = f"http://127.0.0.1:{server.server_address[1]}/healthz"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        bare = Settings(database_url=url)
        assert healthcheck.problem(bare, healthz) == healthcheck.NO_KEYS
        producer_keys.create(engine, "k-db", ["*"], "s" * 43, b"i" * 32, "operator:x", now)
        assert healthcheck.problem(bare, healthz) is None
        producer_keys.revoke(engine, "k-db", "operator:x", now)
        assert healthcheck.problem(bare, healthz) == healthcheck.NO_KEYS
    finally:
        server.shutdown()
        server.server_close()
        engine.dispose()


def test_keys_and_tokens_are_docker_secrets_not_environment(services: dict[str, Any]) -> None:
    """Item 8: every settleq service reads its keys and tokens as files in
    /run/secrets (SETTLEQ_SECRETS_DIR), none from its environment."""
    compose = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    names = {"settleq_producer_keys", "settleq_viewer_tokens", "settleq_operator_tokens"}
    assert names <= set(compose["secrets"])
    for name in SETTLEQ_SERVICES:
        service = services[name]
        env = service.get("environment", {})
        assert env["SETTLEQ_SECRETS_DIR"] == "/run/secrets", name
        assert not {"SETTLEQ_PRODUCER_KEYS", "SETTLEQ_OPERATOR_TOKENS"} & set(env), name
        assert names <= set(service["secrets"]), name


def test_postgres_runs_with_the_bench_settings_and_keeps_its_durability(
    services: dict[str, Any],
) -> None:
    # bench.run starts its cluster with exactly these (bench/server.py reads them here).
    from bench.server import production_settings

    command = services["postgres"]["command"]
    assert command[0] == "postgres"
    settings = production_settings(COMPOSE, environ={})
    assert command[1::2] == ["-c"] * len(settings)
    assert [arg.split("=", 1)[0] for arg in command[2::2]] == list(settings)
    assert settings["shared_buffers"] == "4GB"  # compose's default, as the bench reads it
    assert {"shared_buffers", "max_wal_size", "checkpoint_timeout"} <= set(settings)
    # No speed bought with durability (issue 17): these keep PostgreSQL's defaults.
    for name in ("fsync", "synchronous_commit", "full_page_writes", "wal_level"):
        assert name not in settings, name
