"""``settleq demo``: contracts and one batch of each kind through a stack."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer

from services.commands.errors import answer, refused
from services.commands.help import default
from services.commands.options import (
    DEFAULT_URL,
    KeyOpt,
    SecretOpt,
    TokenOpt,
    UrlOpt,
    console,
    make_client,
    print_job,
    wait_with_progress,
)
from services.commands.preflight import http_url, load_settings
from shared.domain.synthetic import GENERATORS

app = typer.Typer()


def _demo_credentials() -> dict[str, str]:
    from shared.domain.signing import token_digest

    secret = secrets.token_hex(16)
    token = secrets.token_hex(16)
    return {
        "SETTLEQ_PRODUCER_KEYS": json.dumps(
            [{"key_id": "demo", "secrets": [secret], "partitions": ["*"]}]
        ),
        "SETTLEQ_OPERATOR_TOKENS": token_digest(token),
        "SETTLEQ_CLIENT_KEY_ID": "demo",
        "SETTLEQ_CLIENT_SECRET": secret,
        "SETTLEQ_CLIENT_TOKEN": token,
    }


DEMO_CREDENTIALS = "settleq-demo-credentials.env"


def write_credentials(creds: dict[str, str], path: str = DEMO_CREDENTIALS) -> Path:
    """The demo's credentials, for a shell (``set -a; . FILE``), readable by the owner only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an older file keeps its mode otherwise
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(
            "# settleq demo credentials: the server's SETTLEQ_* settings, then the client's\n"
        )
        out.writelines(f"{name}='{value}'\n" for name, value in creds.items())
    return Path(path).resolve()


def print_how_to_look(path: Path, url: str) -> None:
    console.print(
        f"credentials: {path} (mode 0600). To look at these jobs again:\n"
        f"  set -a; . {path}; set +a; settleq up\n"
        f"  then open {url}/dashboard and paste SETTLEQ_CLIENT_TOKEN from that file",
        soft_wrap=True,
    )


def wait_ready(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"the stack at {url} did not become ready")


def run_demo(url: str, key_id: str, secret: str, token: str, lines: int) -> list[dict[str, Any]]:
    """Contracts and one batch of each kind through a running stack."""
    client = make_client(url, key_id, secret, token)
    jobs = []
    for kind, (make_batch, make_contract) in GENERATORS.items():
        batch = make_batch(lines, seed=int(time.time()))
        for partition in sorted({d["partition_key"] for d in batch["documents"]}):
            path = f"/v1/contracts/{kind}/{partition}/1"
            response = client.bearer("PUT", path, make_contract())
            if response.status_code not in (200, 201, 409):  # 409: an earlier demo's
                raise refused(response)
        response = client.submit(json.dumps(batch).encode())
        accepted = answer(response)
        job_id = accepted["job_id"]
        console.print(f"submitted {kind} job {job_id}: {accepted['lines']} lines")
        job = wait_with_progress(client, job_id, timeout=300)
        print_job(job)
        jobs.append(job)
    return jobs


DEMO_LOG = "settleq-demo.log"


@app.command()
def demo(
    url: UrlOpt = DEFAULT_URL,
    key_id: KeyOpt = None,
    secret: SecretOpt = None,
    token: TokenOpt = None,
    lines: Annotated[int, typer.Option(min=1, help="Lines in each kind's batch.")] = 500,
    start_stack: Annotated[
        bool,
        typer.Option(
            "--start-stack",
            help=f"Migrate and start a stack here with fresh credentials (logs: ./{DEMO_LOG}),"
            " then stop it.",
        ),
    ] = False,
    port: Annotated[
        int | None,
        typer.Option(
            help="Port of the API --start-stack starts (else --url's port, if given)."
            + default("SETTLEQ_API_PORT, 8000")
        ),
    ] = None,
) -> None:
    """Publish contracts and run one batch of each kind through the stack; print outcomes.

    Without --start-stack it needs a running stack and an operator token plus a
    producer key (--key-id, --secret, --token).
    """
    if not start_stack:
        if not (key_id and secret and token):
            raise typer.BadParameter("needs --key-id, --secret and --token (or --start-stack)")
        run_demo(url, key_id, secret, token, lines)
        return
    # --port, else a --url (or SETTLEQ_URL) of its own, else where `settleq up`
    # serves: SETTLEQ_API_PORT on SETTLEQ_API_HOST.
    settings = load_settings("demo")
    if port is None and url != DEFAULT_URL:
        port = httpx.URL(url).port or 8000
    else:
        port = settings.api_port if port is None else port
        url = http_url(settings.api_host, port)
    creds = _demo_credentials()
    env = {**os.environ, **creds}
    credentials_file = write_credentials(creds)
    with open(DEMO_LOG, "wb") as log:
        # The stack's own log would interleave with the progress bars: it goes to a file.
        me = [sys.executable, "-m", "services.commands.cli"]
        migrated = subprocess.run([*me, "migrate"], env=env, stdout=log, stderr=subprocess.STDOUT)
        if migrated.returncode != 0:
            console.print(f"migrate failed: see {DEMO_LOG}", style="red")
            raise typer.Exit(1)
        stack = subprocess.Popen(
            [*me, "up", "--port", str(port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        console.print(f"stack starting on {url} (logs: {DEMO_LOG})")
        try:
            _wait_for_stack(url, stack)
            jobs = run_demo(
                url,
                creds["SETTLEQ_CLIENT_KEY_ID"],
                creds["SETTLEQ_CLIENT_SECRET"],
                creds["SETTLEQ_CLIENT_TOKEN"],
                lines,
            )
        finally:
            stack.send_signal(signal.SIGTERM)
            stack.wait(timeout=60)
    print_how_to_look(credentials_file, url)
    if any(job["state"] != "completed" for job in jobs):
        raise typer.Exit(1)


def _wait_for_stack(url: str, stack: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if stack.poll() is not None:
            tail = Path(DEMO_LOG).read_text(errors="replace")[-3000:]
            console.print(f"the stack stopped (exit {stack.returncode}):", style="red")
            console.print(tail)
            raise typer.Exit(1)
        try:
            wait_ready(url, timeout=1)
            return
        except RuntimeError:
            pass
    console.print(
        f"the stack at {url} did not become ready in {timeout:g} s: see {DEMO_LOG}", style="red"
    )
    raise typer.Exit(1)
