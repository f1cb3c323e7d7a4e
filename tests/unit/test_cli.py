from __future__ import annotations

import subprocess
import sys

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
