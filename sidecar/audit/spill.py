"""Where entries wait while the Redis stream is unreachable: a local JSONL file.

JSON lines rather than SQLite: the spill is only ever appended to and then read
once, front to back, by the replay, which resumes at a byte offset; an append is
one write with no schema to open, and what it holds can be read with `head`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
from pydantic import ValidationError

from sidecar.audit.model import AuditEntry
from sidecar.audit.sink import BATCH

# How much of the spill file a replay reads at a time (whole lines, at most BATCH
# entries): memory and each read stay small whatever the file's size.
PIECE_BYTES = 2**20


class SpillFile:
    """Entries held locally while the sink is unreachable, oldest first.

    One file that never rotates: a replay reads only this file, so an entry moved
    to a rotated one would be lost unseen. Its bound is the AuditLog's
    `spill_max_bytes`. A replay reads it in pieces, from an offset.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    async def append(self, entries: list[AuditEntry]) -> None:
        lines = b"".join(orjson.dumps(e.model_dump(mode="json")) + b"\n" for e in entries)
        await asyncio.to_thread(self._append, lines)

    def _append(self, lines: bytes) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("ab") as out:
            out.write(lines)

    def read_piece(self, offset: int) -> tuple[list[AuditEntry], int, int]:
        """The entries in the whole lines from `offset` on, up to about PIECE_BYTES
        or BATCH entries: (entries, the offset after them, how many lines could not
        be read)."""
        entries: list[AuditEntry] = []
        unreadable = 0
        try:
            handle = self.path.open("rb")
        except FileNotFoundError:
            return entries, offset, unreadable
        with handle:
            handle.seek(offset)
            end = offset
            while end - offset < PIECE_BYTES and len(entries) < BATCH:
                line = handle.readline()
                if not line:
                    break
                end += len(line)
                if not line.strip():
                    continue
                try:
                    entries.append(AuditEntry.model_validate_json(line))
                except ValidationError:
                    unreadable += 1
        return entries, end, unreadable

    def exists(self) -> bool:
        return self.path.exists()

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)

    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0
