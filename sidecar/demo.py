"""`whose demo`: the launch-date story from docs/design.md §1, end to end over HTTP.

It starts a sidecar on embedded defaults (temporary data directory, a local
OPA, dev identity on loopback), writes what Alice said in a private session,
shows the flattening write being refused, and asks as Alice and as Bob.
"""

from __future__ import annotations

import asyncio
import json
import socket
import tempfile
from pathlib import Path
from typing import Any

import aiohttp
import uvicorn
from rich.console import Console
from rich.table import Table

from sidecar.http.app import create_app
from sidecar.settings import Settings

SESSION = "private-session-42"
LAUNCH = {"text": "the launch is October 17", "key": "launch.date", "value": "2026-10-17"}

# What the memory extractor heard, posted as an observation: who spoke, who was there.
ALICE_SAID = {
    "speaker": "alice",
    "source_id": SESSION,
    "channel": "dm",
    "participants": ["alice"],
    "said_at": "2026-10-01T09:00:00Z",
    "access_scope": "launch-core",
    "claims": [
        {"proposition": LAUNCH, "hedged": False, "confidence": 0.78},
        {"proposition": LAUNCH, "about": "bob", "attitude": "knows", "hedged": True},
    ],
}

# What a naive extractor makes of "I think Bob already knows".
FLATTENED = {
    "content": "Bob knows the launch is October 17",
    "proposition": LAUNCH,
    "observer_id": "bob",
    "source_id": SESSION,
    "source": {"kind": "conversation", "speaker": "alice"},
    "modality": "known",
    "audience": ["alice", "bob"],
}
EXTRACTOR = "extractor-bot"


def _identity(who: str) -> dict[str, str]:
    return {"X-Whose-Asker": who, "X-Whose-Tenant": "acme"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _story(base: str) -> dict[str, Any]:
    async with aiohttp.ClientSession(base) as http:
        async with http.post(
            "/v1/observations", json=ALICE_SAID, headers=_identity(EXTRACTOR)
        ) as r:
            stored = await r.json()
        async with http.post("/v1/memories", json=FLATTENED, headers=_identity(EXTRACTOR)) as r:
            refused = {"status": r.status, **(await r.json())}
        question = {"query": "when is the launch?"}
        answers = {}
        for who in ("alice", "bob"):
            async with http.post("/v1/recall", json=question, headers=_identity(who)) as r:
                answers[who] = await r.json()
    return {"stored": stored, "refused": refused, "answers": answers}


async def _run_with_sidecar(data_dir: Path) -> dict[str, Any]:
    port = _free_port()
    settings = Settings(dev=True, port=port, data_dir=data_dir)
    config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if serving.done():
                serving.result()
            await asyncio.sleep(0.05)
        return await _story(f"http://127.0.0.1:{port}")
    finally:
        server.should_exit = True
        await serving


def _column(answer: dict[str, Any]) -> str:
    lines = [f"verdict: {answer['verdict']}"]
    lines += [f"• {item['attribution']} [{item['usable_as']}]" for item in answer["items"]]
    if not answer["items"]:
        lines.append("(nothing disclosed: verify or abstain)")
    return "\n".join(lines)


def run() -> None:
    console = Console()
    with tempfile.TemporaryDirectory(prefix="whose-demo-") as tmp:
        result = asyncio.run(_run_with_sidecar(Path(tmp)))
    said = "“The launch is October 17. I think Bob already knows.”"
    console.print(f"[bold]Alice, in a private session:[/] {said}")
    for record in result["stored"]["records"]:
        console.print(
            f"  stored: {record['content']}  "
            f"[dim](holder {record['observer_id']}, {record['modality']}, "
            f"audience {record['audience']})[/]"
        )
    refused = result["refused"]
    reasons = refused["reasons"][0]["reasons"] if refused.get("reasons") else refused
    console.print(
        f"The extractor's flattened write “{FLATTENED['content']}” → "
        f"{refused['status']} {refused['error']}: {', '.join(reasons)}\n"
    )
    table = Table(title='POST /v1/recall {"query": "when is the launch?"}')
    table.add_column("Alice receives", ratio=1)
    table.add_column("Bob receives", ratio=1)
    table.add_row(_column(result["answers"]["alice"]), _column(result["answers"]["bob"]))
    console.print(table)
    leaked = "October 17" in json.dumps(result["answers"]["bob"])
    console.print(
        f"Does Bob's response contain the date anywhere? {'YES (leak!)' if leaked else 'no'}"
    )
