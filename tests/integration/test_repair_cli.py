"""`whose repair`: close chains an interrupted write left open, from the command line."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from sidecar.embed.hashing import HashingEmbedder
from sidecar.store.edge import EdgeStore
from sidecar.store.scope import Scope
from tests.conftest import REPO

embed = HashingEmbedder(384).embed


def version(**extra: str) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": str(uuid.uuid4()),
        "tenant": "acme",
        "content": "alice believes k",
        "proposition": {"text": "k", "key": "k"},
        "observer_id": "alice",
        "modality": "believed",
        "source_id": "s",
        "audience": ["alice"],
        "valid_at": "2026-10-01T00:00:00Z",
        "recorded_at": "2026-10-01T00:00:00Z",
    }
    return record | extra


async def test_repair_command_closes_an_interrupted_chain(tmp_path: Path) -> None:
    folder = tmp_path / "store" / "whose_memories"
    store = EdgeStore(folder, 384)
    await store.open()
    old = version()
    # The state a crash between storing a new version and closing the old one leaves.
    new = version(supersedes=str(old["id"]), valid_at="2026-10-02T00:00:00Z")
    await store.put("acme", [(old, {"": embed("k")}), (new, {"": embed("k")})])
    await store.close()

    result = await asyncio.to_thread(
        subprocess.run,
        [
            sys.executable,
            "-m",
            "sidecar",
            "repair",
            "--tenant",
            "acme",
            "--data-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    assert "repaired 1 field updates in tenant acme" in result.stdout

    store = EdgeStore(folder, 384)
    await store.open()
    records = {h.id: h.payload for h in (await store.find(Scope(tenant="acme"), 10)).records}
    await store.close()
    assert records[old["id"]]["superseded_by"] == new["id"]
    assert records[old["id"]]["invalid_at"] == "2026-10-02T00:00:00Z"
    assert "invalid_at" not in records[new["id"]]
