"""Shared test factories: one shape of a stored memory record, and one served sidecar
for a module, instead of a copy in each test file."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.conftest import start_sidecar, stop


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
