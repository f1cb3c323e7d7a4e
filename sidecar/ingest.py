"""Writes: prepare each record, ask the write policy about the whole batch, then
store it whole or not at all.

The tenant and the writer come from the verified identity. The write policy
(Rego, `whose.ingest`) decides whether each record keeps its point of view;
this module only enforces what must hold for any policy: ids, vectors, and the
supersession chain.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sidecar.embed import HashingEmbedder
from sidecar.identity import Identity
from sidecar.policy import PolicyClient
from sidecar.record import MemoryRecord, MemoryWrite, Provenance
from sidecar.store import Store


@dataclass
class WriteRefused(Exception):
    """422: every reason, per record index; nothing was stored."""

    problems: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Prepared:
    record: MemoryRecord
    vector: list[float]

    @property
    def payload(self) -> dict[str, Any]:
        return self.record.payload()


class Writer:
    """Owns the write path; one lock serialises supersession within this process."""

    def __init__(self, store: Store, policy: PolicyClient, embedder: HashingEmbedder) -> None:
        self.store = store
        self.policy = policy
        self.embedder = embedder
        self._chain_lock = asyncio.Lock()

    async def write(
        self, bodies: list[MemoryWrite], writer: Identity, now: datetime
    ) -> list[MemoryRecord]:
        prepared = [self._prepare(body, writer, now) for body in bodies]
        _refuse_if(_shape_problems(bodies, prepared, writer, self.embedder.dim))
        decisions = await self.policy.ingest(writer, [p.payload for p in prepared], premises=[])
        _refuse_if(
            [
                {"index": i, "id": str(p.record.id), "reasons": sorted(decision.reasons)}
                for i, p in enumerate(prepared)
                if not (decision := decisions[str(p.record.id)]).allow
            ]
        )
        async with self._chain_lock:
            await self._refuse_taken_ids(prepared, writer)
            superseded = await self._superseded(prepared, writer)
            await self.store.put(writer.tenant, [(p.payload, p.vector) for p in prepared])
            # The new versions are stored first: if we stop here, the old ones are
            # still current and their successors still name them.
            for old_id, new in superseded:
                await self.store.update(
                    writer.tenant,
                    old_id,
                    {"invalid_at": new.payload["valid_at"], "superseded_by": str(new.record.id)},
                )
        return [p.record for p in prepared]

    def _prepare(self, body: MemoryWrite, writer: Identity, now: datetime) -> Prepared:
        provenance = body.provenance or Provenance()
        record = MemoryRecord.model_validate(
            {
                **body.model_dump(exclude={"vector", "provenance"}),
                "id": body.id or uuid.uuid4(),
                "tenant": writer.tenant,
                "recorded_at": now,
                "valid_at": body.valid_at or now,
                "provenance": provenance.model_copy(update={"writer": writer.id}),
            }
        )
        text = record.proposition.text if record.proposition else record.content
        vector = body.vector if body.vector is not None else self.embedder.embed(text)
        return Prepared(record, vector)

    async def _refuse_taken_ids(self, prepared: list[Prepared], writer: Identity) -> None:
        ids = [p.record.id for p in prepared if p.record.id is not None]
        taken = {hit.record["id"] for hit in await self.store.get(writer.tenant, ids)}
        _refuse_if(
            [
                {"index": i, "id": str(p.record.id), "reasons": ["id_exists"]}
                for i, p in enumerate(prepared)
                if str(p.record.id) in taken
            ]
        )

    async def _superseded(
        self, prepared: list[Prepared], writer: Identity
    ) -> list[tuple[uuid.UUID, Prepared]]:
        """The current versions each new record replaces, checked before anything is stored."""
        wanted = [(i, p) for i, p in enumerate(prepared) if p.record.supersedes is not None]
        if not wanted:
            return []
        old_ids = [p.record.supersedes for _, p in wanted if p.record.supersedes is not None]
        old = {hit.record["id"]: hit.record for hit in await self.store.get(writer.tenant, old_ids)}
        problems, chain = [], []
        targets: set[uuid.UUID] = set()
        for i, p in wanted:
            assert p.record.supersedes is not None
            previous = old.get(str(p.record.supersedes))
            forks = p.record.supersedes in targets
            targets.add(p.record.supersedes)
            if previous is None or forks or not _may_supersede(previous, p.payload):
                # One reason for missing, someone else's, already replaced and forked:
                # the writer learns nothing about records it cannot see.
                problems.append(
                    {"index": i, "id": str(p.record.id), "reasons": ["cannot_supersede"]}
                )
            else:
                chain.append((p.record.supersedes, p))
        _refuse_if(problems)
        return chain


def _may_supersede(previous: dict[str, Any], new: dict[str, Any]) -> bool:
    return (
        "superseded_by" not in previous
        and "invalid_at" not in previous
        and previous.get("observer_id") == new.get("observer_id")
        and previous.get("observed_id") == new.get("observed_id")
        and datetime.fromisoformat(previous["valid_at"]) <= datetime.fromisoformat(new["valid_at"])
    )


def _shape_problems(
    bodies: list[MemoryWrite], prepared: list[Prepared], writer: Identity, dim: int
) -> list[dict[str, Any]]:
    problems = []
    seen: set[str] = set()
    for i, (body, p) in enumerate(zip(bodies, prepared, strict=True)):
        reasons = []
        if body.tenant is not None and body.tenant != writer.tenant:
            reasons.append("tenant_not_writers")
        if body.superseded_by is not None:
            reasons.append("superseded_by_is_set_by_the_sidecar")
        if len(p.vector) != dim:
            reasons.append(f"vector_dimension_must_be_{dim}")
        if str(p.record.id) in seen:
            reasons.append("duplicate_id_in_batch")
        seen.add(str(p.record.id))
        if reasons:
            problems.append({"index": i, "id": str(p.record.id), "reasons": reasons})
    return problems


def _refuse_if(problems: list[dict[str, Any]]) -> None:
    if problems:
        raise WriteRefused(problems)
