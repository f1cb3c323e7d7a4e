"""Testimony: whether a hearer takes what they were told as their own belief.

A claim made to hearers (an observation with participants) is stored once, as the
speaker's statement (writes/observations.py); what each hearer heard, and their
model of the speaker's belief, are derived from it at read time
(answers/derived.py). Whether a hearer also comes to believe the claim themselves
is the trust policy's call (Rego, `whose.trust`; by default never), asked here once
per observation, before the write: each adopted claim becomes one more record of
the batch, the hearer's belief (`source.kind: testimony`, naming the speaker), told
to the hearer alone, so it supersedes what the hearer believed before in that chain
and is superseded by what they see next.

The policy is given, per claim, the teller, each hearer, and each one's latest
evidence about the claim's key when it was said (their latest perception of it,
read from the store): the shipped example that adopts from a teller who saw the key
more recently needs it. The writer is told only the records it asked for: whether a
hearer adopted a claim depends on records the writer may not read
(docs/security.md, "Testimony").
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sidecar.auth.identity import Identity
from sidecar.messages import Observation
from sidecar.policy.contract import PolicyIdentity, TrustClaim, TrustHearer, TrustInput
from sidecar.policy.engine import PolicyEngine
from sidecar.record import MemoryWrite, iso
from sidecar.store import Store
from sidecar.store.scope import AnyOf, Scope
from sidecar.writes.observations import DEFAULT_CONFIDENCE

# The provenance method of an adopted belief.
TESTIMONY = "testimony"
# Heads of perception chains read per key (a few per person: one per audience).
_MAX_EVIDENCE = 1000


async def adopted(
    policy: PolicyEngine, store: Store, writer: Identity, observation: Observation, now: datetime
) -> list[MemoryWrite]:
    """The hearers' beliefs the trust policy adopts from the observation's claims."""
    speaker = observation.speaker
    hearers = [p for p in observation.present if p != speaker]
    if not hearers:
        return []
    said_at = observation.said_at or now
    keys = sorted({k for c in observation.claims if (k := c.proposition.key)})
    evidence = await latest_evidence(store, writer.tenant, keys, [speaker, *hearers], said_at)
    question = TrustInput(
        writer=writer.policy_view(),
        claims=[
            TrustClaim(
                teller=PolicyIdentity(id=speaker, tenant=writer.tenant),
                hearers=[TrustHearer(id=h, evidence_at=_seen(evidence, h, key)) for h in hearers],
                key=key,
                hedged=claim.hedged,
                about=claim.path(speaker),
                said_at=iso(said_at),
                teller_evidence_at=_seen(evidence, speaker, key),
            )
            for claim in observation.claims
            for key in [claim.proposition.key]
        ],
    )
    adoptions = await policy.trust(question)
    present = observation.present
    records = []
    for claim, adopters in zip(observation.claims, adoptions, strict=True):
        about = claim.path(speaker)
        for hearer in hearers:
            if hearer not in adopters or about[:1] == [hearer]:
                continue  # a claim about the hearer's own mind is not theirs to adopt
            text = claim.proposition.text
            records.append(
                MemoryWrite(
                    content=f"{hearer} believes, as {speaker} told them, that {text}",
                    proposition=claim.proposition,
                    observer_id=hearer,
                    observed_path=about or None,
                    observed_attitude=(claim.attitude or "believes") if about else None,
                    source_id=observation.source_id,
                    source={
                        "kind": TESTIMONY,
                        "speaker": speaker,
                        "channel": observation.channel,
                        "participants": present,
                    },
                    modality="believed",
                    confidence=claim.confidence
                    if claim.confidence is not None
                    else DEFAULT_CONFIDENCE[claim.hedged],
                    audience=[hearer],
                    access_scope=observation.access_scope,
                    valid_at=observation.said_at,
                    provenance={"method": TESTIMONY},
                )
            )
    return records


async def latest_evidence(
    store: Store, tenant: str, keys: Sequence[str], people: Sequence[str], at: datetime
) -> dict[tuple[str, str], datetime]:
    """Each person's latest own perception of each key that applied at `at`: when
    they last saw it for themselves."""
    latest: dict[tuple[str, str], datetime] = {}
    for key in keys:
        scope = Scope(
            tenant=tenant,
            about=key,
            modality="observed",
            current_at=at,
            absent=("observed_id",),
            extra=(AnyOf("observer_id", tuple(sorted(set(people)))),),
        )
        page = await store.find(scope, _MAX_EVIDENCE)
        for record in page.records:
            person = str(record.payload.get("observer_id"))
            seen = latest.get((person, key))
            if seen is None or record.valid_at > seen:
                latest[(person, key)] = record.valid_at
    return latest


def _seen(evidence: dict[tuple[str, str], datetime], who: str, key: str | None) -> str | None:
    instant = evidence.get((who, key)) if key is not None else None
    return None if instant is None else iso(instant)
