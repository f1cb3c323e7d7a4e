"""`whose bench` writes its datasets through the real API and write policy: every
record it generates must be accepted, and each asker must read what the report says
(the policy, not the generator, decides that)."""

from __future__ import annotations

import random

import httpx
import pytest

from sidecar.bench import corpus as sweep
from sidecar.bench.dataset import ASKERS, dataset, load
from tests.conftest import as_, start_sidecar


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


def test_each_sweep_asker_may_read_exactly_their_fraction_and_recall_finds_the_truth(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # A sidecar of its own: the counts below must see this corpus only.
    base, process = start_sidecar(tmp_path_factory.mktemp("sweep"))
    try:
        n = 600
        corpus = sweep.build(n, 4, seed=3)
        ids = sweep.load(base, corpus)
        index = {record_id: i for i, record_id in enumerate(ids)}
        with httpx.Client(base_url=base, timeout=60) as http:
            for layout, fraction in sweep.cells():
                who = sweep.asker(layout, fraction)
                counted = http.post(
                    "/collections/whose_memories/points/count", json={}, headers=as_(who)
                )
                assert counted.status_code == 200, counted.text
                assert counted.json()["result"]["count"] == round(fraction * n), who
                for q in range(len(corpus.queries)):
                    body = {"vector": corpus.queries[q].tolist(), "limit": sweep.LIMIT}
                    answer = http.post("/v1/recall", json=body, headers=as_(who))
                    assert answer.status_code == 200, answer.text
                    returned = [index[str(item["id"])] for item in answer.json()["items"]]
                    # A small store is searched exactly: all of the true nearest.
                    assert corpus.recall_at_10(who, q, returned) == 1.0, (who, q)
    finally:
        process.terminate()
        process.wait(timeout=30)
