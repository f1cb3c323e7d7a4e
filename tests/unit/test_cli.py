from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from sidecar.settings import Settings, is_loopback


def whose(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "sidecar", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "example.com"])
def test_dev_mode_refuses_a_non_loopback_host(host: str) -> None:
    result = whose("serve", "--dev", "--host", host, "--port", "1")
    assert result.returncode == 2
    assert "refusing --dev on non-loopback host" in result.stderr


def test_serve_without_identity_provider_refuses_to_start() -> None:
    result = whose("serve", "--port", "1")
    assert result.returncode == 2
    assert "no identity provider" in result.stderr


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
    assert result.returncode == 2
    port = ports[taken]
    assert result.stderr.strip().splitlines()[-1] == (
        f"cannot serve: 127.0.0.1:{port} is in use: change {setting}"
    )
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("::1", True), ("localhost", True), ("10.0.0.1", False)],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_settings_come_from_whose_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WHOSE_PORT", "9999")
    monkeypatch.setenv("WHOSE_OVERFETCH_FACTOR", "7")
    settings = Settings()
    assert (settings.port, settings.overfetch_factor) == (9999, 7)
