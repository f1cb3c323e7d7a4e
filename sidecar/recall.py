"""Recall: over-fetch candidates, let the policy decide each, return the verdict.

Relevance is not permission. The store finds what is similar within the asker's
tenant; the policy decides, in one call per round, what may be disclosed to the
asker and the whole audience; the loop widens while too few were allowed and
more candidates exist, within fixed bounds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sidecar import metrics
from sidecar.allow_rate import first_batch
from sidecar.attribution import disclosed_item
from sidecar.embed import HashingEmbedder
from sidecar.gate import Disclosure
from sidecar.identity import Identity
from sidecar.links import links_within
from sidecar.messages import RecallRequest, RecallResponse
from sidecar.policy import Decision, DisclosureQuestion
from sidecar.store import Hit, Scope, Store
from sidecar.verdict import decide, settle


@dataclass(frozen=True)
class Bounds:
    overfetch_factor: int
    max_rounds: int
    max_candidates: int


@dataclass
class Candidates:
    """What the over-fetch loop found: allowed hits, and whether it stopped early."""

    allowed: list[tuple[Hit, Decision]]
    rounds: int
    truncated: bool


async def recall(
    request: RecallRequest,
    asker: Identity,
    gate: Disclosure,
    *,
    store: Store,
    embedder: HashingEmbedder,
    bounds: Bounds,
    now: datetime,
) -> RecallResponse:
    """`gate` was opened for this request's question (see `recall_question`)."""
    vector = request.vector if request.vector is not None else embedder.embed(request.query or "")
    history = request.include_history
    # Records the asker may never see are kept out of the ranking, not just the answer.
    pushdown = await gate.pushdown()
    scope = pushdown.narrow(
        Scope(
            tenant=asker.tenant,
            current_at=None if history else (request.as_of or now),
            about=request.about,
            observer=request.observer,
            source_id=request.source_id,
            modality=request.modality,
            min_confidence=request.min_confidence,
        )
    )
    found = await overfetch(vector, scope, gate, request.limit, store, bounds)
    chosen = found.allowed[: request.limit]
    # Links only to versions this answer discloses: a search makes no extra decisions.
    shown = links_within([hit for hit, _ in chosen], _ids(found.allowed))
    # Status is told at the instant asked about: what was current then.
    at = request.as_of or now
    items = settle(
        [
            disclosed_item(hit.record, decision, at, hit.score)
            for hit, (_, decision) in zip(shown, chosen, strict=True)
        ]
    )
    verdict, conflicts = decide(items)
    return RecallResponse(
        verdict=verdict,
        items=items,
        conflicts=conflicts,
        decision_id=gate.decision_id,
        # With nothing allowed, "the bound stopped us" would say that many records the
        # asker may not see match the filters: an abstention stays an abstention.
        truncated=found.truncated and bool(items),
    )


async def overfetch(
    vector: list[float],
    scope: Scope,
    gate: Disclosure,
    limit: int,
    store: Store,
    bounds: Bounds,
    *,
    score_threshold: float | None = None,
    with_vector: bool = False,
    adaptive: bool = True,
) -> Candidates:
    """`adaptive=False` sizes the first round by the configured factor alone, so that
    the same question always examines the same candidates (the proxy's offset paging
    relies on that when scores tie: the store orders ties by no fixed rule)."""
    rate = await gate.allow_rate() if adaptive else None
    batch = first_batch(limit, rate, bounds.overfetch_factor, bounds.max_candidates)
    rounds = 0
    seen: set[str] = set()
    allowed: list[tuple[Hit, Decision]] = []
    while True:
        hits = await store.search(
            vector,
            scope,
            batch,
            exclude=seen,
            score_threshold=score_threshold,
            with_vector=with_vector,
        )
        rounds += 1
        exhausted = len(hits) < batch
        seen.update(str(hit.record.get("id")) for hit in hits)
        # Asked even for an empty batch: with the policy down, "nothing found"
        # and "nothing allowed" must look the same.
        decisions = await gate.decide([hit.record for hit in hits])
        allowed += [
            (hit, decision)
            for hit in hits
            if (decision := decisions[str(hit.record.get("id"))]).allow
        ]
        if len(allowed) >= limit or exhausted:
            return _counted(Candidates(allowed, rounds, truncated=False))
        if rounds >= bounds.max_rounds or len(seen) >= bounds.max_candidates:
            return _counted(Candidates(allowed, rounds, truncated=True))
        batch = min(batch * 2, bounds.max_candidates - len(seen))


def _ids(allowed: list[tuple[Hit, Decision]]) -> set[str]:
    return {str(hit.record.get("id")) for hit, _ in allowed}


def _counted(found: Candidates) -> Candidates:
    metrics.OVERFETCH_ROUNDS.observe(found.rounds)
    if found.truncated:
        metrics.TRUNCATED.inc()
    return found


def recall_question(request: RecallRequest, asker: Identity, now: datetime) -> DisclosureQuestion:
    return DisclosureQuestion(
        asker=asker,
        audience=request.audience,
        purpose="history" if request.include_history else "recall",
        now=now,
        as_of=request.as_of,
    )
