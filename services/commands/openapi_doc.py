"""``settleq openapi``: the published API contract, rendered from the app itself."""

from __future__ import annotations

import sys

import typer

from services.commands.preflight import load_settings

app = typer.Typer()


@app.command()
def openapi() -> None:
    """Print the OpenAPI document the API serves, as YAML (for openapi.yaml)."""
    sys.stdout.write(render_openapi())


def render_openapi() -> str:
    import yaml

    from services.api.app import create_app

    return str(
        yaml.safe_dump(create_app(load_settings("openapi")).openapi(), sort_keys=False, width=100)
    )
