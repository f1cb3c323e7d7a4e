"""Start-up, as a person at a terminal meets it: every refusal is one line naming the
setting to change or the process in the way (no traceback), and the log says where
each listener is. (Refusals of the settings alone, before anything starts, are in
tests/unit/test_cli.py.)

Each command runs as `whose` runs (`python -m sidecar`, a real process) with
WHOSE_LOG_LEVEL=WARNING, so what it prints on a refusal is exactly what the person
reads: the assertions compare the whole of stderr.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import REPO, free_port, free_ports, start_sidecar, stop, wait_until_ready

# WHOSE_OPS_PORT's default is WHOSE_PORT + this (docs/operations.md), written here as
# the documentation says it, not imported.
OPS_PORT_OFFSET = 1100


def whose(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "sidecar", *args]
    environment = {**os.environ, "WHOSE_LOG_LEVEL": "WARNING", **(env or {})}
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=environment,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
    )


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    """The refusal: exit status 2 and a single line on stderr, nothing else."""
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_serve_without_identity_provider_refuses_to_start() -> None:
    result = whose("serve", "--port", "1")
    assert one_line(result).startswith("configuration error: no identity provider")


def test_serve_with_a_key_file_it_cannot_read_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-key.pem"
    result = whose("serve", "--port", "1", env={"WHOSE_JWT_PUBLIC_KEY_FILE": str(missing)})
    assert result.returncode == 2, result.stderr
    assert one_line(result).startswith("cannot serve: ")
    assert str(missing) in result.stderr


@pytest.mark.parametrize(("taken", "setting"), [("ops", "WHOSE_OPS_PORT"), ("api", "WHOSE_PORT")])
def test_serve_on_a_port_in_use_says_which_setting_in_one_line(
    tmp_path: Path, taken: str, setting: str
) -> None:
    with socket.socket() as held, socket.socket() as free:
        held.bind(("127.0.0.1", 0))
        held.listen()
        free.bind(("127.0.0.1", 0))
        ports = {"api": free.getsockname()[1], "ops": free.getsockname()[1]}
        ports[taken] = held.getsockname()[1]
        free.close()
        result = whose(
            "serve",
            "--dev",
            "--port",
            str(ports["api"]),
            "--ops-port",
            str(ports["ops"]),
            "--data-dir",
            str(tmp_path),
        )
    port = ports[taken]
    assert one_line(result) == f"cannot serve: 127.0.0.1:{port} is in use: change {setting}"


def test_serve_with_one_port_for_both_listeners_is_one_line(tmp_path: Path) -> None:
    # The API's socket, bound but not yet listening while the store opened, let the
    # operations listener bind the same port: health answered, then the API failed to
    # start with a bare "[Errno 98] Address already in use".
    port = str(free_port())
    result = whose(
        "serve", "--dev", "--port", port, "--ops-port", port, "--data-dir", str(tmp_path)
    )
    assert one_line(result) == (
        f"configuration error: WHOSE_OPS_PORT={port} is WHOSE_PORT too: the API and"
        " operations listeners need ports of their own"
    )


def test_a_missing_model_folder_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    api_port, ops_port = free_ports(2)
    result = whose(
        "serve",
        "--dev",
        "--port",
        str(api_port),
        "--ops-port",
        str(ops_port),
        "--data-dir",
        str(tmp_path / "data"),
        env={"WHOSE_EMBED_MODEL_DIR": str(missing)},
    )
    assert one_line(result) == (
        f"configuration error: WHOSE_EMBED_MODEL_DIR {missing} is not a folder"
    )


# --- a data folder another process holds --------------------------------------------


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int, str]]:
    """A served sidecar on its own data folder: the folder, its pid, its API address."""
    folder = tmp_path_factory.mktemp("held")
    base, process = start_sidecar(folder)
    yield folder, process.pid, base
    stop(process)


PORT_ATTEMPTS = 5


@pytest.mark.parametrize(
    ("command", "doing"),
    [
        (["serve", "--dev"], "cannot serve"),
        (["mcp", "--dev", "--asker", "alice"], "cannot serve"),
        (["sweep"], "cannot sweep"),
        (["repair", "--tenant", "acme"], "cannot repair"),
        (["reindex"], "cannot reindex"),
    ],
)
def test_a_store_in_use_names_the_process_holding_it(
    running: tuple[Path, int, str], command: list[str], doing: str
) -> None:
    folder, pid, _ = running
    for _ in range(PORT_ATTEMPTS):
        # A port free when chosen may be taken before it is bound (by any process on the
        # machine): that refusal comes first, so choose again (as start_sidecar does).
        api_port, ops_port = free_ports(2)
        ports = ["--port", str(api_port), "--ops-port", str(ops_port)]
        extra = ports if command[0] == "serve" else []
        result = whose(*command, *extra, "--data-dir", str(folder))
        if "is in use: change WHOSE_" not in result.stderr:
            break
    store = folder / "store" / "whose_memories"
    line = one_line(result)
    assert line.startswith(f"{doing}: the store {store} is in use by process {pid} ("), line
    assert "(whose serve --dev --port " in line  # the holder's command line
    assert line.endswith(
        ": stop it, or give this one another WHOSE_DATA_DIR (--data-dir); to share one"
        " store, use a Qdrant server (WHOSE_STORE=server)"
    )


def test_the_log_says_where_each_listener_is(running: tuple[Path, int, str]) -> None:
    folder, pid, base = running
    port = int(base.rsplit(":", 1)[1])
    lines = [json.loads(line) for line in (folder / "sidecar.log").read_text().splitlines()]
    listeners = {line["listener"]: line["url"] for line in lines if "listener" in line}
    assert listeners.keys() == {"api", "mcp", "operations"}
    assert listeners["api"] == base
    assert listeners["mcp"] == f"{base}/mcp"
    assert httpx.get(f"{listeners['operations']}/healthz").status_code == 200
    assert f"API on {base} (pid {pid})" in [line["message"] for line in lines]
    assert listeners["operations"] != f"http://127.0.0.1:{port}"
    # uvicorn's unlabelled per-server lines (two servers, one process) are gone.
    assert not [line for line in lines if "server process" in line["message"]]


# --- the operations port follows the API's ----------------------------------------------


def two_free_ports(apart: int) -> int:
    """A port p such that p and p + apart are both free now."""
    for _ in range(100):
        port = free_port()
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port + apart))
            except (OSError, OverflowError):
                continue
        return port
    raise AssertionError("no pair of free ports")


def test_whose_port_alone_moves_both_listeners_and_a_terminal_reads_text(tmp_path: Path) -> None:
    """`WHOSE_PORT=18080 make serve` beside a running sidecar: the operations listener
    moves with the API (WHOSE_PORT + 1100) instead of failing on 9180; and at a
    terminal the log is plain text, not JSON."""
    port = two_free_ports(OPS_PORT_OFFSET)
    primary, terminal = pty.openpty()
    command = [sys.executable, "-m", "sidecar", "serve", "--dev", "--data-dir", str(tmp_path)]
    environment = {**os.environ, "WHOSE_PORT": str(port)}
    environment.pop("WHOSE_OPS_PORT", None)
    environment.pop("WHOSE_LOG_FORMAT", None)
    process = subprocess.Popen(
        command, stdout=terminal, stderr=terminal, stdin=subprocess.DEVNULL, env=environment
    )
    os.close(terminal)
    seen = b""
    try:
        ops = f"http://127.0.0.1:{port + OPS_PORT_OFFSET}"
        log = tmp_path / "seen.log"
        deadline = time.monotonic() + 180
        while b"operations on" not in seen and time.monotonic() < deadline:
            if process.poll() is not None:
                break
            if select.select([primary], [], [], 0.5)[0]:
                try:
                    seen += os.read(primary, 65536)
                except OSError:
                    break
        log.write_bytes(seen)
        wait_until_ready(f"{ops}/healthz", process, log)
        assert httpx.get(f"http://127.0.0.1:{port}/openapi.json").status_code == 200
    finally:
        stop(process)
        os.close(primary)
    text = seen.decode(errors="replace")
    assert f"operations on {ops} (/healthz, /readyz, /metrics)" in text, text
    started = [line for line in text.splitlines() if "API on" in line]
    assert started, text
    assert not started[0].lstrip().startswith("{"), "a terminal got JSON"
    assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ INFO whose API on", started[0]), text
