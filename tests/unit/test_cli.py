"""The command line's settings, and the refusals that come before anything starts,
run in-process by click's runner (what needs a served sidecar or a store runs as
processes in tests/integration/test_startup.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from sidecar.cli import app, settings_problems
from sidecar.logs import as_json
from sidecar.settings import Settings, is_loopback


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


@pytest.mark.parametrize(
    ("given", "operations"),
    [
        ({}, 9180),
        ({"port": 18080}, 19180),
        ({"port": 18080, "ops_port": 9999}, 9999),
        ({"port": 0}, 0),
    ],
)
def test_the_operations_port_follows_the_api_port_unless_set(
    given: dict[str, int], operations: int
) -> None:
    assert Settings.model_validate(given).operations_port == operations


def test_settings_problems_name_every_setting_in_one_line() -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(port=99999, workers=0)
    assert settings_problems(refused.value) == (
        "WHOSE_PORT=99999: input should be less than or equal to 65535; "
        "WHOSE_WORKERS=0: input should be greater than or equal to 1"
    )


def test_settings_problems_never_show_a_secret() -> None:
    with pytest.raises(ValidationError) as refused:
        Settings.model_validate({"jwt_hs256_secret": ["not", "a", "string"]})
    problem = settings_problems(refused.value)
    assert problem.startswith("WHOSE_JWT_HS256_SECRET: ")
    assert "not" not in problem.split(":", 1)[0]
    assert "'a'" not in problem


@pytest.mark.parametrize(
    ("log_format", "terminal", "json"),
    [
        ("auto", True, False),
        ("auto", False, True),
        ("json", True, True),
        ("text", False, False),
    ],
)
def test_logs_are_text_for_a_person_and_json_for_a_collector(
    log_format: str, terminal: bool, json: bool
) -> None:
    assert as_json(log_format, terminal) is json


def refusal(*args: str, env: dict[str, str] | None = None) -> str:
    """What `whose ARGS` prints when it refuses: exit status 2, one line on stderr."""
    result = CliRunner().invoke(app, list(args), env=env)
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "example.com"])
def test_dev_mode_refuses_a_non_loopback_host(host: str) -> None:
    assert refusal("serve", "--dev", "--host", host, "--port", "1") == (
        f"refusing --dev on non-loopback host {host}"
    )


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (
            {"WHOSE_PORT": "99999"},
            "WHOSE_PORT=99999: input should be less than or equal to 65535",
        ),
        (
            {"WHOSE_OPS_PORT": "-1"},
            "WHOSE_OPS_PORT=-1: input should be greater than or equal to 0",
        ),
        (
            {"WHOSE_PORT": "http"},
            "WHOSE_PORT=http: input should be a valid integer, unable to parse string as an"
            " integer",
        ),
        (
            {"WHOSE_PORT": "65000"},
            "WHOSE_PORT=65000 leaves no default for WHOSE_OPS_PORT (65000 + 1100 > 65535):"
            " set WHOSE_OPS_PORT",
        ),
    ],
)
def test_an_invalid_port_is_one_line_naming_the_setting(given: dict[str, str], says: str) -> None:
    assert refusal("serve", "--dev", env=given) == f"configuration error: {says}"


def test_a_port_flag_is_checked_as_its_setting() -> None:
    assert refusal("serve", "--dev", "--port", "99999") == (
        "configuration error: WHOSE_PORT=99999: input should be less than or equal to 65535"
    )


@pytest.mark.parametrize(
    "command", [["sweep"], ["repair", "--tenant", "acme"], ["mcp"], ["reindex"]]
)
def test_an_invalid_setting_of_any_command_is_one_line(command: list[str]) -> None:
    assert refusal(*command, env={"WHOSE_WORKERS": "0"}) == (
        "configuration error: WHOSE_WORKERS=0: input should be greater than or equal to 1"
    )


def test_a_secret_setting_is_named_but_never_echoed() -> None:
    secret = "too-short-secret"
    line = refusal("sweep", env={"WHOSE_JWT_HS256_SECRET": secret, "WHOSE_LOCK_TTL_S": "-1"})
    assert line.startswith("configuration error: WHOSE_LOCK_TTL_S=-1: ")
    assert secret not in line
