"""The `whose` command: serve, mcp, demo, repair, sweep, reindex, adopt, policy, bench,
schemas."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, get_args

import typer
from pydantic import SecretStr, ValidationError

from sidecar.settings import Settings, is_loopback

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)


if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress


def settings_from_environment(**overrides: Any) -> Settings:
    """The WHOSE_* settings with the flags given (None: not given), or exit 2 with one
    line naming each setting that is wrong (pydantic's report is a dozen lines)."""
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        typer.echo(f"configuration error: {settings_problems(exc)}", err=True)
        raise typer.Exit(code=2) from None


def settings_problems(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors():
        why = error["msg"].removeprefix("Value error, ")
        if not error["loc"]:  # a check across settings: its message names them
            problems.append(why)
            continue
        name = str(error["loc"][0])
        field = Settings.model_fields.get(name)
        secret = field is not None and SecretStr in (field.annotation, *get_args(field.annotation))
        shown = "" if secret or "input" not in error else f"={error['input']}"
        problems.append(f"WHOSE_{name.upper()}{shown}: {why[:1].lower()}{why[1:]}")
    return "; ".join(problems)


def _progress_bar(console: Console) -> Progress:
    """A long run's bar on a terminal (adopt, policy impact), gone when it ends. rich is
    imported here, on a terminal only: the commands' other paths never need it."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    return Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )


def refuse(doing: str, exc: BaseException) -> typer.Exit:
    """Exit 2 after one line saying why `doing` could not start."""
    typer.echo(f"{doing}: {exc}", err=True)
    return typer.Exit(code=2)


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Listen address (WHOSE_HOST).")] = None,
    port: Annotated[int | None, typer.Option(help="Listen port (WHOSE_PORT).")] = None,
    ops_port: Annotated[
        int | None, typer.Option(help="Health and metrics port (WHOSE_OPS_PORT).")
    ] = None,
    grpc_port: Annotated[
        str | None,
        typer.Option(help="Qdrant's gRPC API: a port, or off (WHOSE_GRPC_PORT; default 6334)."),
    ] = None,
    data_dir: Annotated[Path | None, typer.Option(help="Store and logs (WHOSE_DATA_DIR).")] = None,
    dev: Annotated[
        bool, typer.Option("--dev", help="Accept X-Whose-* header identity; loopback only.")
    ] = False,
    workers: Annotated[
        int | None,
        typer.Option(help="Worker processes (WHOSE_WORKERS); >1 needs the server store and Redis."),
    ] = None,
) -> None:
    """Run the sidecar (embedded defaults: Qdrant edge on disk, a local OPA)."""
    import asyncio

    from sidecar import logs
    from sidecar.auth.tokens import identity_provider

    settings = settings_from_environment(
        host=host,
        port=port,
        ops_port=ops_port,
        grpc_port=grpc_port,
        data_dir=data_dir,
        workers=workers,
    )
    if dev:
        settings = settings.model_copy(update={"dev": True})
    if settings.dev and not is_loopback(settings.host):
        # Header identity means anyone can claim to be anyone: never off this machine.
        typer.echo(f"refusing --dev on non-loopback host {settings.host}", err=True)
        raise typer.Exit(code=2)
    logs.configure(settings)
    # Before the server's modules load (about 5 s on two busy cores): the most common
    # misconfiguration is one line at once, and the same for every worker count.
    try:
        identity_provider(settings)
    except ValueError as exc:
        raise refuse("configuration error", exc) from None
    except OSError as exc:  # a key file that cannot be read
        raise refuse("cannot serve", exc) from None
    if settings.workers > 1:
        from sidecar.workers import serve_workers

        try:
            status = serve_workers(settings, settings.workers)
        except ValueError as exc:
            raise refuse("configuration error", exc) from None
        except OSError as exc:  # a socket that could not be bound (serving.listen)
            raise refuse("cannot serve", exc) from None
        if status:
            typer.echo("cannot serve: a worker failed to start (see the log above)", err=True)
        raise typer.Exit(code=status)
    from sidecar.serving import serve as run

    try:
        asyncio.run(run(settings))
    except ValueError as exc:
        raise refuse("configuration error", exc) from None
    except OSError as exc:  # a port (serving.listen), the store's folder (store/edge.py)
        raise refuse("cannot serve", exc) from None


@app.command()
def mcp(
    dev: Annotated[
        bool, typer.Option("--dev", help="Serve as --asker/--tenant, no token (local use).")
    ] = False,
    asker: Annotated[str | None, typer.Option(help="With --dev: who is asking.")] = None,
    tenant: Annotated[str, typer.Option(help="With --dev: the asker's tenant.")] = "acme",
    group: Annotated[list[str] | None, typer.Option(help="With --dev: a group; repeat.")] = None,
    role: Annotated[list[str] | None, typer.Option(help="With --dev: a role; repeat.")] = None,
    data_dir: Annotated[Path | None, typer.Option(help="Store and logs (WHOSE_DATA_DIR).")] = None,
) -> None:
    """Serve whose's memory tools to an MCP host over stdio (Claude Desktop, Cursor...).

    Identity: the token in WHOSE_TOKEN, verified like an API request's (WHOSE_JWT_*), or
    with --dev the --asker and --tenant given. The store and policy are opened as by
    `whose serve` (embedded defaults: its own store under --data-dir)."""
    import asyncio
    import logging
    import os

    from sidecar import logs
    from sidecar.auth.identity import Refused, dev_identity
    from sidecar.mcp.stdio import serve_stdio

    settings = settings_from_environment(data_dir=data_dir)
    if dev:
        settings = settings.model_copy(update={"dev": True})
    logs.configure(settings)  # to stderr: stdout carries the protocol
    try:
        who = None
        if dev:
            if asker is None:
                raise ValueError("--dev needs --asker")
            try:
                who = dev_identity(asker, tenant, group or (), role or ())
            except Refused:
                raise ValueError(
                    "invalid dev identity: names are 1..200 characters, unpadded, no group as"
                    " --asker, at most 100 groups and roles"
                ) from None
        logging.getLogger("whose").info("MCP on stdio (data dir %s)", settings.data_dir)
        asyncio.run(serve_stdio(settings, os.environ.get("WHOSE_TOKEN"), who))
    except ValueError as exc:
        raise refuse("configuration error", exc) from None
    except OSError as exc:  # the store's folder held by another process (store/edge.py)
        raise refuse("cannot serve", exc) from None


@app.command()
def demo() -> None:
    """Run the launch-date story end to end and show what Alice and Bob receive."""
    from sidecar.demo import run

    run()


@app.command()
def repair(
    tenant: Annotated[str, typer.Option(help="Tenant whose belief chains to check.")],
    data_dir: Annotated[Path | None, typer.Option(help="Store folder (WHOSE_DATA_DIR).")] = None,
) -> None:
    """Finish writes cut short: close each version still current though a stored one replaces it.

    With the embedded store, stop the sidecar first (one process owns the folder);
    with a Qdrant server and Redis locks it is safe beside running sidecars.
    """
    import asyncio

    from sidecar.services import chain_locks, open_redis, open_store
    from sidecar.writes.repair import repair as repair_chains

    settings = settings_from_environment(data_dir=data_dir)

    async def run() -> int:
        store = open_store(settings)
        await store.open()
        try:
            async with open_redis(settings) as redis:
                return await repair_chains(store, chain_locks(settings, redis), tenant)
        finally:
            await store.close()

    try:
        repaired = asyncio.run(run())
    except ValueError as exc:
        raise refuse("configuration error", exc) from None
    except OSError as exc:  # the store's folder held by another process (store/edge.py)
        raise refuse("cannot repair", exc) from None
    typer.echo(f"repaired {repaired} field updates in tenant {tenant}")


@app.command()
def sweep(
    tenant: Annotated[
        list[str] | None, typer.Option(help="Sweep only this tenant; repeat (default: all).")
    ] = None,
    now: Annotated[
        str | None,
        typer.Option(help="Sweep as of this instant (RFC 3339), not the clock's (tests, audits)."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Decide and count; erase nothing.")
    ] = False,
    max_erased: Annotated[
        int | None, typer.Option(help="Records erased at most (WHOSE_RETENTION_MAX_ERASED).")
    ] = None,
    max_examined: Annotated[
        int | None,
        typer.Option(help="Records examined at most (WHOSE_RETENTION_MAX_EXAMINED)."),
    ] = None,
    data_dir: Annotated[Path | None, typer.Option(help="Store folder (WHOSE_DATA_DIR).")] = None,
) -> None:
    """Erase the records the retention policy says have expired (legal holds kept).

    Bounded: at most --max-erased erased and --max-examined examined; run it again to
    go on. With the embedded store, stop the sidecar first (one process owns the
    folder), or let the server sweep on its schedule (WHOSE_RETENTION_INTERVAL_S)."""
    import asyncio
    import json
    from datetime import UTC, datetime

    from sidecar import logs
    from sidecar.auth.tokens import Authenticator
    from sidecar.services import open_services
    from sidecar.stack_paths import merged

    settings = settings_from_environment(data_dir=data_dir)
    logs.configure(settings)
    at = None
    if now is not None:
        try:
            at = datetime.fromisoformat(now.replace("Z", "+00:00")).astimezone(UTC)
        except ValueError:
            typer.echo(f"--now is not an RFC 3339 instant: {now!r}", err=True)
            raise typer.Exit(code=2) from None

    async def run() -> dict[str, Any]:
        # No request is served: the identity settings are not needed.
        unused = Authenticator(settings.model_copy(update={"dev": True}))
        async with open_services(settings, unused, background=False) as services:
            if at is not None:
                services.sweeper.clock = services.eraser.clock = lambda: at
                services.stacks.clock = lambda: at
            erased_at_most = max_erased or settings.retention_max_erased
            examined_at_most = max_examined or settings.retention_max_examined
            report = await services.sweeper.sweep(
                max_erased=erased_at_most,
                max_examined=examined_at_most,
                tenants=tenant,
                dry_run=dry_run,
            )
            # Then the stacks' own collections, within what the run has left.
            stacks = await services.stacks.sweep(
                max_erased=erased_at_most - report.erased,
                max_examined=examined_at_most - report.examined,
                tenants=tenant,
                dry_run=dry_run,
            )
            report = merged(report, stacks)
            await services.audit.flushed()
        return {
            "now": report.now.isoformat(),
            "horizon_days": report.horizon_days,
            "tenants": report.tenants,
            "examined": report.examined,
            "expired": report.expired,
            "erased": report.erased,
            "held": report.held,
            "stopped_by_bound": report.stopped_by_bound,
            "dry_run": dry_run,
        }

    try:
        typer.echo(json.dumps(asyncio.run(run())))
    except ValueError as exc:
        raise refuse("configuration error", exc) from None
    except OSError as exc:  # the store's folder held by another process (store/edge.py)
        raise refuse("cannot sweep", exc) from None


@app.command()
def reindex(
    data_dir: Annotated[Path | None, typer.Option(help="Store folder (WHOSE_DATA_DIR).")] = None,
    page: Annotated[int, typer.Option(help="Records per page (each page is saved).")] = 256,
) -> None:
    """Re-embed the store for the configured embedder (WHOSE_EMBED_*), resumably.

    Copies every record into a collection made for the configured model and puts it in
    the old one's place. Stop the sidecars first; run it again to go on after a stop.
    """
    import asyncio

    from sidecar import logs
    from sidecar.embed.onnx import OnnxEmbedder
    from sidecar.services import index_spec, open_embedder
    from sidecar.store.reindex import reindex_edge, reindex_server
    from sidecar.store.server import Layout

    settings = settings_from_environment(data_dir=data_dir)
    logs.configure(settings)

    async def run() -> int:
        embedder = open_embedder(settings)
        if isinstance(embedder, OnnxEmbedder):
            await asyncio.to_thread(embedder.load)
        index = index_spec(embedder)
        try:
            if settings.store == "edge":
                path = settings.data_dir / "store" / settings.collection
                return await reindex_edge(path, embedder, index, page, typer.echo)
            if not settings.qdrant_url:
                raise ValueError("WHOSE_STORE=server needs WHOSE_QDRANT_URL")
            key = settings.qdrant_api_key
            return await reindex_server(
                [u.strip() for u in settings.qdrant_url.split(",") if u.strip()],
                settings.collection,
                embedder,
                index,
                page,
                typer.echo,
                api_key=key.get_secret_value() if key else None,
                layout=Layout(
                    settings.qdrant_shards,
                    settings.qdrant_replication,
                    settings.qdrant_write_consistency,
                ),
            )
        finally:
            await embedder.close()

    try:
        copied = asyncio.run(run())
    except (ValueError, OSError) as exc:  # OSError: the store's folder is held (store/edge.py)
        raise refuse("cannot reindex", exc) from None
    typer.echo(f"reindexed: {copied} records copied by this run")


@app.command()
def adopt(
    source: Annotated[str, typer.Argument(help="The collection on the Qdrant server to adopt.")],
    tenant: Annotated[str, typer.Option(help="The tenant the documents become part of.")],
    as_: Annotated[
        str, typer.Option("--as", help="Who writes them (the labeling policy's writer).")
    ],
    collection: Annotated[
        str | None, typer.Option(help="The tenant's stack collection (default: SOURCE).")
    ] = None,
    group: Annotated[list[str] | None, typer.Option(help="A group of the writer; repeat.")] = None,
    role: Annotated[list[str] | None, typer.Option(help="A role of the writer; repeat.")] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Label and count; write nothing, save nothing.")
    ] = False,
    batch: Annotated[int, typer.Option(help="Points per batch (1..1000).")] = 256,
    max_points: Annotated[
        int | None, typer.Option("--max", help="Points read by this run at most.")
    ] = None,
    restart: Annotated[
        bool, typer.Option("--restart", help="Start over, forgetting the saved progress.")
    ] = False,
    data_dir: Annotated[
        Path | None, typer.Option(help="Where progress is saved (WHOSE_DATA_DIR).")
    ] = None,
) -> None:
    """Put whose in front of a collection already on its Qdrant server, resumably.

    Reads SOURCE (never changes it), makes a stack collection of --tenant with its
    vectors, and writes each point through the write path as --as: its vectors, its
    id, its payload as the document. The labeling policy decides each point's readers;
    a point it leaves unlabeled is not written, and is reported with its reasons.
    Progress is saved after each batch under <data_dir>/adopt/: run it again to go on.
    """
    import asyncio
    import logging
    import sys

    from qdrant_client import AsyncQdrantClient
    from rich.console import Console

    from sidecar import adopt as adoption
    from sidecar import logs
    from sidecar.auth.identity import Refused, dev_identity
    from sidecar.auth.tokens import Authenticator
    from sidecar.errors import WhoseError
    from sidecar.services import open_services

    settings = settings_from_environment(data_dir=data_dir)
    logs.configure(settings)
    if settings.store != "server" or not settings.qdrant_url:
        typer.echo(
            "cannot adopt: whose adopts a collection of the Qdrant server it fronts:"
            " set WHOSE_STORE=server and WHOSE_QDRANT_URL",
            err=True,
        )
        raise typer.Exit(code=2)
    try:
        who = dev_identity(as_, tenant, group or (), role or ())
    except Refused:
        typer.echo(
            "cannot adopt: --as and --tenant must be names (1..200 characters, unpadded;"
            " --as not a group)",
            err=True,
        )
        raise typer.Exit(code=2) from None
    plan = adoption.Plan(source, collection or source, who, batch, max_points, dry_run)
    url = settings.qdrant_url.split(",")[0].strip()
    key = settings.qdrant_api_key
    console = Console(stderr=True)  # stdout: the report alone
    path = adoption.progress_path(settings.data_dir, who.tenant, source)
    fresh = adoption.Progress(who.tenant, source, plan.target, who.id)

    async def run() -> list[str]:
        client = AsyncQdrantClient(
            url=url,
            api_key=key.get_secret_value() if key else None,
            timeout=settings.qdrant_timeout_s,
            check_compatibility=False,
        )
        try:
            read = adoption.Source(client, source, url)
            await read.create_body()  # a missing source or server: said before OPA starts
            total = await read.count()
            restarted = dry_run or restart
            progress = fresh if restarted else adoption.load_progress(path, fresh)
            unused = Authenticator(settings.model_copy(update={"dev": True}))
            async with open_services(settings, unused, background=False) as svc:
                adopting = adoption.Adoption(svc, read, plan)
                await adopting.prepare()
                left = total - progress.tally.seen
                bound = left if max_points is None else min(left, max_points)
                save = lambda p: adoption.save_progress(path, p)  # noqa: E731
                if console.is_terminal:
                    with _progress_bar(console) as bar:
                        task = bar.add_task(f"adopting {source}", total=max(bound, 0))
                        seen = await adopting.run(progress, save, lambda _, n: bar.advance(task, n))
                else:

                    def plain(seen: int, n: int) -> None:
                        typer.echo(f"{source}: {seen} points read by this run (+{n})", err=True)

                    seen = await adopting.run(progress, save, plain)
                await svc.audit.flushed()
            line = adoption.summary(plan, progress.tally, seen, progress, total)
            logging.getLogger("whose").info(line, extra={"asker": who.id, "tenant": who.tenant})
            return [line, *adoption.reasons_report(progress.tally)]
        finally:
            await client.close()

    try:
        lines = asyncio.run(run())
    except adoption.AdoptFailed as exc:
        raise refuse("cannot adopt", exc) from None
    except WhoseError as exc:
        why = ", ".join(str(r) for r in exc.reasons)
        raise refuse("cannot adopt", Exception(f"{exc}" + (f" ({why})" if why else ""))) from None
    except (ValueError, OSError) as exc:
        raise refuse("cannot adopt", exc) from None
    for line in lines:
        typer.echo(line)
    sys.stdout.flush()


policy = typer.Typer(no_args_is_help=True, help="Policy tools for security teams.")
app.add_typer(policy, name="policy")


@policy.command("impact")
def policy_impact(
    candidate: Annotated[
        Path, typer.Argument(help="The candidate policy: a directory, or a bundle (.tar.gz).")
    ],
    url: Annotated[
        str, typer.Option(help="The sidecar to ask (its API address).")
    ] = "http://127.0.0.1:8080",
    since: Annotated[str | None, typer.Option(help="Reads audited from (RFC 3339).")] = None,
    until: Annotated[str | None, typer.Option(help="Reads audited until (RFC 3339).")] = None,
    asker: Annotated[str | None, typer.Option(help="Only this asker's reads.")] = None,
    max_decisions: Annotated[int, typer.Option(help="Pairs decided at most.")] = 1000,
    max_seconds: Annotated[float, typer.Option(help="Seconds the replay may take.")] = 60.0,
    max_examples: Annotated[int, typer.Option(help="Flips listed at most.")] = 20,
    fail_on_disclosure: Annotated[
        bool,
        typer.Option("--fail-on-disclosure", help="Exit 1 if any record is newly disclosed."),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole report as JSON.")] = (
        False
    ),
    dev_as: Annotated[
        str | None,
        typer.Option(help="Dev identity (a sidecar run with --dev): ask as this policy admin."),
    ] = None,
    tenant: Annotated[str, typer.Option(help="With --dev-as: the tenant.")] = "acme",
) -> None:
    """What a candidate policy would change about the reads the sidecar audited.

    Every audited read of the window is decided again, record by record, under the
    policy in force and under CANDIDATE, by the sidecar at --url (as its policy admin:
    the token in WHOSE_TOKEN, or --dev-as). Prints the flips: newly disclosed, newly
    withheld, changed use, by rule, asker and source. Exit 0; 1 with
    --fail-on-disclosure when a record would be newly disclosed; 2 when it could not run.
    """
    import json
    import os

    import httpx
    from rich.console import Console

    from sidecar.policy.candidate import pack
    from sidecar.policy.impact import ImpactReport, summary

    if candidate.is_dir():
        body = pack(candidate)
    elif candidate.is_file():
        body = candidate.read_bytes()
    else:
        typer.echo(f"cannot run: no candidate policy at {candidate}", err=True)
        raise typer.Exit(code=2)
    headers = {"content-type": "application/gzip", "accept": "application/x-ndjson"}
    token = os.environ.get("WHOSE_TOKEN")
    if dev_as is not None:
        headers |= {
            "X-Whose-Asker": dev_as,
            "X-Whose-Tenant": tenant,
            "X-Whose-Roles": "policy-admin",
        }
    elif token:
        headers["authorization"] = f"Bearer {token}"
    else:
        typer.echo("cannot run: set WHOSE_TOKEN (a policy admin's token), or --dev-as", err=True)
        raise typer.Exit(code=2)
    params = {
        k: v
        for k, v in {
            "since": since,
            "until": until,
            "asker": asker,
            "max_decisions": max_decisions,
            "max_seconds": max_seconds,
            "max_examples": max_examples,
        }.items()
        if v is not None
    }
    console = Console(stderr=True)  # stdout: the report alone
    found: dict[str, object] = {}

    def read(lines: httpx.Response, advance: object) -> None:
        for line in lines.iter_lines():
            if not line:
                continue
            message = json.loads(line)
            if "progress" in message:
                if callable(advance):
                    advance(message["progress"])
            else:
                found.update(message)

    try:
        with httpx.stream(
            "POST",
            f"{url.rstrip('/')}/v1/policy/impact",
            content=body,
            headers=headers,
            params=params,
            timeout=httpx.Timeout(10, read=max_seconds + 120),
        ) as response:
            if response.status_code != 200:
                response.read()
                found.update(response.json() | {"status": response.status_code})
            elif console.is_terminal:
                with _progress_bar(console) as bar:
                    task = bar.add_task("replaying", total=None)
                    read(
                        response,
                        lambda p: bar.update(task, completed=p["done"], total=p["total"]),
                    )
            else:
                read(response, None)
    except (httpx.HTTPError, ValueError) as exc:
        raise refuse("cannot run", exc) from None
    if "report" not in found:
        reasons = found.get("reasons") or []
        typer.echo(
            f"cannot run: {found.get('status', '?')} {found.get('error', 'no report')}"
            + (f" {reasons}" if reasons else ""),
            err=True,
        )
        raise typer.Exit(code=2)
    built = ImpactReport.model_validate(found["report"])
    if as_json:
        typer.echo(built.model_dump_json(indent=2))
    else:
        for line in summary(built):
            typer.echo(line)
    if fail_on_disclosure and built.flips.newly_disclosed:
        typer.echo(
            f"failing: {built.flips.newly_disclosed} decisions would newly disclose "
            f"{len(built.records.newly_disclosed)} records",
            err=True,
        )
        raise typer.Exit(code=1)


@app.command()
def bench(
    records: Annotated[
        list[int] | None,
        typer.Option(help="Corpus sizes; repeat the option (default 10000; e.g. 100000 too)."),
    ] = None,
    queries: Annotated[int, typer.Option(help="Queries per measurement.")] = 200,
    out: Annotated[Path, typer.Option(help="Folder for bench.json and bench.png.")] = Path(
        "bench/results"
    ),
    backend: Annotated[
        list[str] | None,
        typer.Option(help="Scale-out mode: edge and/or server (repeat); see sidecar/bench/."),
    ] = None,
    workers: Annotated[
        list[int] | None, typer.Option(help="Scale-out mode: server worker counts (repeat).")
    ] = None,
    qdrant: Annotated[
        Path, typer.Option(help="Scale-out mode and --dialect: the Qdrant server binary.")
    ] = Path("bin/qdrant"),
    variant: Annotated[
        list[str] | None,
        typer.Option(
            help="Sweep: a configuration to measure, NAME[@REV]:VAR=VALUE[,VAR=VALUE] "
            "(repeat), e.g. server:WHOSE_LOCAL_OPA=server; each against the same "
            "passthrough. NAME@REV serves git revision REV of this repository: "
            "--variant before@main: --variant after: compares two versions of the code."
        ),
    ] = None,
    peer: Annotated[
        bool,
        typer.Option(
            help="Sweep: measure wardowl too, on the same engine, data and access rules "
            "(sidecar/bench/peer.py), cell by cell beside whose."
        ),
    ] = True,
    dialect: Annotated[
        bool,
        typer.Option(
            help="Sweep: also the same cells through the Qdrant dialect on a stack "
            "collection, beside Qdrant directly (a Qdrant server: --qdrant)."
        ),
    ] = False,
) -> None:
    r"""Sweep recall cost and recall@10 over readable fractions, against the plain store.

    With --backend: scale-out instead (scale.json), embedded vs server with N workers.
    Needs the bench extra: pip install 'whose\[bench]'."""
    try:
        from sidecar.bench import report, scale, sweep
    except ImportError as exc:
        from sidecar.bench import missing_extra

        if not missing_extra(exc):
            raise
        typer.echo(f"whose bench needs {exc.name}: install whose[bench]", err=True)
        raise typer.Exit(code=2) from None

    if backend:
        try:
            scaled = scale.run(records or [10_000], backend, workers or [1], queries, out, qdrant)
        except ValueError as exc:
            typer.echo(f"configuration error: {exc}", err=True)
            raise typer.Exit(code=2) from exc
        typer.echo(report.scale_table(scaled))
        typer.echo(f"report: {out / 'scale.json'}")
        return

    try:
        variants = sweep.parse_variants(variant or [])
    except ValueError as exc:
        typer.echo(f"configuration error: {exc}", err=True)
        raise typer.Exit(code=2) from exc
    if dialect and not qdrant.resolve().exists():
        # Said before minutes of measuring, not after.
        typer.echo(f"configuration error: no Qdrant server at {qdrant} (--qdrant)", err=True)
        raise typer.Exit(code=2)
    result = sweep.run(
        records or [10_000],
        queries,
        out,
        variants=variants,
        with_peer=peer,
        dialect_on=qdrant if dialect else None,
    )
    typer.echo(report.sweep_table(result))
    if peer:
        typer.echo("")
        typer.echo(report.peer_table(result))
    if dialect:
        typer.echo("")
        typer.echo(report.dialect_table(result))
    typer.echo(f"report: {out / 'bench.json'}, plot: {out / 'bench.png'}")


@app.command()
def schemas(
    out: Annotated[Path, typer.Option(help="Folder for the JSON Schemas.")] = Path("schemas"),
) -> None:
    """Write the JSON Schemas of the record and API models."""
    from sidecar.schemas import write_schemas

    for path in write_schemas(out):
        typer.echo(path)
