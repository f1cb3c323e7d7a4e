"""The `whose` command: serve, demo, schemas."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from sidecar.settings import Settings, is_loopback

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Listen address (WHOSE_HOST).")] = None,
    port: Annotated[int | None, typer.Option(help="Listen port (WHOSE_PORT).")] = None,
    data_dir: Annotated[Path | None, typer.Option(help="Store and logs (WHOSE_DATA_DIR).")] = None,
    dev: Annotated[
        bool, typer.Option("--dev", help="Accept X-Whose-* header identity; loopback only.")
    ] = False,
) -> None:
    """Run the sidecar (embedded defaults: Qdrant edge on disk, a local OPA)."""
    import uvicorn

    from sidecar.app import create_app

    overrides: dict[str, Any] = {"host": host, "port": port, "data_dir": data_dir}
    settings = Settings(**{k: v for k, v in overrides.items() if v is not None})
    if dev:
        settings = settings.model_copy(update={"dev": True})
    if settings.dev and not is_loopback(settings.host):
        # Header identity means anyone can claim to be anyone: never off this machine.
        typer.echo(f"refusing --dev on non-loopback host {settings.host}", err=True)
        raise typer.Exit(code=2)
    try:
        application = create_app(settings)
    except ValueError as exc:
        typer.echo(f"configuration error: {exc}", err=True)
        raise typer.Exit(code=2) from exc
    uvicorn.run(application, host=settings.host, port=settings.port, log_level="info")


@app.command()
def demo() -> None:
    """Run the launch-date story end to end and show what Alice and Bob receive."""
    from sidecar.demo import run

    run()


@app.command()
def schemas(
    out: Annotated[Path, typer.Option(help="Folder for the JSON Schemas.")] = Path("schemas"),
) -> None:
    """Write the JSON Schemas of the record and API models."""
    from sidecar.schemas import write_schemas

    for path in write_schemas(out):
        typer.echo(path)
