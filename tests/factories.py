"""Shared test factories: one shape of a stored memory record, and one served sidecar
for a module, instead of a copy in each test file."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import as_, start_sidecar, stop


def record(
    content: str = "alice believes the launch is October 17",
    *,
    tenant: str = "acme",
    holder: str = "alice",
    **fields: Any,
) -> dict[str, Any]:
    """A memory record as the store holds it, with a new id: `holder`'s assertion, told
    to the holder alone; every other field as given (`fields` win)."""
    return {
        "id": str(uuid.uuid4()),
        "tenant": tenant,
        "content": content,
        "observer_id": holder,
        "modality": "asserted",
        "source_id": "s",
        "audience": [holder],
        "confidence": 0.5,
        "valid_at": "2026-10-01T00:00:00Z",
    } | fields


@contextmanager
def served(
    data_dir: Path, env: dict[str, str] | None = None, dev: bool = True, grpc: bool = False
) -> Iterator[str]:
    """`whose serve` on `data_dir` for the length of the block (its API address; with
    `grpc`, its gRPC port is `GRPC[address]`); the process is reaped on every path out."""
    base, process = start_sidecar(data_dir, env, dev, grpc)
    try:
        yield base
    finally:
        stop(process)


def tell_the_worked_example(http: httpx.Client, headers: dict[str, str]) -> dict[str, str]:
    """docs/policies.md's worked example: an extractor (`headers`) stores what bob said,
    hedged, in the stand-up (bob and dave there) and in a DM to alice; two propositions,
    one key each (one key would make one chain: the DM version would supersede the
    stand-up one). The record id of each, by channel."""
    ids: dict[str, str] = {}
    for channel, participants, key in (
        ("launch-standup", ["bob", "dave"], "launch.slip"),
        ("dm", ["bob", "alice"], "launch.budget"),
    ):
        said = http.post(
            "/v1/observations",
            headers=headers,
            json={
                "speaker": "bob",
                "source_id": f"{channel}-1",
                "channel": channel,
                "participants": participants,
                "claims": [
                    {
                        "proposition": {
                            "text": "the launch slips two weeks",
                            "key": key,
                            "value": "2026-10-31",
                        },
                        "hedged": True,
                    }
                ],
            },
        )
        assert said.status_code == 201, said.text
        ids[channel] = said.json()["records"][0]["id"]
    return ids


def mcp_call(http: httpx.Client, who: str, tool: str, arguments: dict[str, Any]) -> Any:
    """One MCP tools/call over the sidecar's streamable HTTP endpoint, as `who` (dev
    headers): its result (the call's own error, if any, is in it as `isError`)."""
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    headers = as_(who) | {"Accept": "application/json, text/event-stream"}
    answer = http.post("/mcp", json=message, headers=headers)
    assert answer.status_code == 200, answer.text
    return answer.json()["result"]
