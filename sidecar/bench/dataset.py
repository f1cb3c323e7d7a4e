"""The text dataset of mixed allow rates, loaded by the scale-out run (scale.py) and
the scripts under bench/.

Two tenants; principals with allow rates of about 0.9 (alice), 0.5 (carol) and 0.1
(bob); groups, a scope, every writable modality, supersession chains; and 1% of
records readable only by erin, about a topic far from every query. Written through
the API (`load`), so every record passes the write policy.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from typing import Any

import httpx

ASKERS = {"alice": 0.9, "carol": 0.5, "bob": 0.1}
TOPICS = [
    f"{a} {b}"
    for a in ("launch", "budget", "hiring", "roadmap", "vendor", "security", "pricing")
    for b in ("date", "owner", "risk", "status", "scope")
]
ATTRIBUTES = ["is due", "moved to", "depends on", "was approved by", "is blocked by"]
VALUES = ["October 17", "Q3", "the platform team", "legal", "next sprint", "the board"]
# (weight, audience, scope): alice reads ~0.9, carol ~0.5, bob ~0.1 of acme's records.
AUDIENCES = [
    (0.10, ["group:launch-team"], None),
    (0.25, ["alice", "carol"], None),
    (0.15, ["alice", "carol"], "launch-core"),
    (0.40, ["alice"], None),
    (0.10, ["dave"], None),
]
MODALITIES = ["reported_belief", "asserted", "believed", "inferred"]
FAR_TOPIC = "orchard irrigation schedule for the pear trees"
DIM = 384
LIMIT = 10


def headers(asker: str) -> dict[str, str]:
    return {"X-Whose-Asker": asker, "X-Whose-Tenant": "acme"}


def _holder(audience: list[str], rng: random.Random) -> str:
    people = [a for a in audience if not a.startswith("group:")]
    return people[0] if people else rng.choice(["alice", "bob", "carol"])


def dataset(n: int, rng: random.Random) -> list[dict[str, Any]]:
    """Records of tenant acme (and a few of globex), ready for POST /v1/memories."""
    records: list[dict[str, Any]] = []
    weights = [w for w, _, _ in AUDIENCES]
    for i in range(n):
        if i % 100 == 0:  # 1%: erin's, far from every query
            records.append(_record(f"erin notes the {FAR_TOPIC} {i}", "erin", ["erin"], None, i))
            continue
        if i % 50 == 1:  # another tenant: never a candidate for acme's askers
            records.append(_record("mallory believes the launch is off", "mallory", ["mallory"]))
            records[-1]["tenant_hint"] = "globex"
            continue
        _, audience, scope = rng.choices(AUDIENCES, weights)[0]
        topic = rng.choice(TOPICS)
        text = f"the {topic} {rng.choice(ATTRIBUTES)} {rng.choice(VALUES)}"
        if i % 25 == 2:  # an authority's world-state claim
            record = _record(f"the release calendar says {text}", "release-bot", audience, scope, i)
            record.update(modality="world_state", source={"kind": "change_record"})
            del record["observer_id"]
        else:
            holder = _holder(audience, rng)
            record = _record(f"{holder} believes {text}", holder, audience, scope, i)
            record["modality"] = rng.choice(MODALITIES)
        # Keys repeat (i % 300): later writes by the same holder supersede earlier ones.
        record["proposition"] = {"text": text, "key": f"{topic.replace(' ', '.')}.{i % 300}"}
        records.append(record)
    return records


def _record(
    content: str, writer: str, audience: list[str], scope: str | None = None, i: int = 0
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "content": content,
        "observer_id": writer,
        "source_id": f"session-{i % 500}",
        "source": {"kind": "conversation", "speaker": writer},
        "modality": "asserted",
        "confidence": 0.8,
        "audience": audience,
        "writer_hint": writer,
    }
    if scope:
        record["access_scope"] = scope
    return record


def queries(n: int, rng: random.Random) -> list[str]:
    return [f"{rng.choice(TOPICS)} {rng.choice(ATTRIBUTES)}" for _ in range(n)]


def batches(
    records: list[dict[str, Any]],
) -> Iterator[tuple[dict[str, str], list[dict[str, Any]]]]:
    """Each writer's run of records, in order (so chains form), in batches of at most
    500 (headers, bodies); a batch never holds two versions of one chain."""
    batch: list[dict[str, Any]] = []
    who: tuple[str, str] | None = None
    for record in records:
        body = {k: v for k, v in record.items() if not k.endswith("_hint")}
        writer = (record["writer_hint"], record.get("tenant_hint", "acme"))
        key = (record.get("proposition") or {}).get("key")
        if (
            writer != who
            or len(batch) >= 500
            or any((b.get("proposition") or {}).get("key") == key and key for b in batch)
        ):
            if batch and who:
                yield {"X-Whose-Asker": who[0], "X-Whose-Tenant": who[1]}, batch
            batch, who = [], writer
        batch.append(body)
    if batch and who:
        yield {"X-Whose-Asker": who[0], "X-Whose-Tenant": who[1]}, batch


def load(base: str, records: list[dict[str, Any]]) -> float:
    """Write every record as its writer (see `batches`); the seconds it took."""
    started = time.perf_counter()
    with httpx.Client(base_url=base, timeout=300) as http:
        for headers, batch in batches(records):
            http.post("/v1/memories", json=batch, headers=headers).raise_for_status()
    return time.perf_counter() - started
