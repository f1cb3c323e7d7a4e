"""`whose bench` writes its dataset through the real API and write policy: every
record it generates must be accepted, and the askers' allow rates must be what
the report says they are."""

from __future__ import annotations

import random

import httpx

from sidecar.benchmark import ASKERS, dataset, load
from tests.conftest import as_


def test_the_benchmark_dataset_loads_and_has_the_advertised_allow_rates(
    sidecar: str, http: httpx.Client
) -> None:
    records = dataset(400, random.Random(1))
    load(sidecar, records)  # raises on any refused batch
    # Records of acme that erin does not own (about 98%); a few are superseded versions.
    total = sum(
        r.get("tenant_hint", "acme") == "acme" and r["audience"] != ["erin"] for r in records
    )
    for asker, rate in ASKERS.items():
        counted = http.post("/collections/whose_memories/points/count", json={}, headers=as_(asker))
        assert counted.status_code == 200, counted.text
        share = counted.json()["result"]["count"] / total
        assert abs(share - rate) <= 0.1, (asker, share)
