"""The peer `whose bench` measures whose against (sidecar/bench/peer.py): wardowl's own
HTTP service and ACL authorizer on the embedded Qdrant engine, served as the sweep
serves it. It must hold the same access rules as whose on the same corpus (each asker
reads exactly their records, and finds the true nearest of them), refuse a caller with
no identity, and the bench must count a leak in a real answer of it."""

from __future__ import annotations

from pathlib import Path

import httpx

from sidecar.bench import peer
from sidecar.bench.corpus import LIMIT, asker, build, cells
from sidecar.bench.processes import peer as serve_peer


def test_the_peer_answers_each_asker_their_true_nearest_and_a_leak_is_counted(
    tmp_path: Path,
) -> None:
    corpus = build(600, 4, seed=3)
    peer.build(tmp_path / "peer", corpus)
    with serve_peer(tmp_path / "peer") as served, httpx.Client(base_url=served.base) as http:
        for layout, fraction in cells():
            who = asker(layout, fraction)
            answers = []
            for q in range(len(corpus.queries)):
                response = http.post(
                    "/v1/retrieve",
                    json=peer.request(corpus.queries[q], LIMIT),
                    headers=peer.headers(who),
                )
                assert response.status_code == 200, response.text
                answers.append(peer.returned(response.json()))
            # A small store is scanned, not walked: all of the true nearest, nothing else.
            assert corpus.quality(who, answers) == {"mean": 1.0, "min": 1.0, "leaks": 0}, who
        # The same answer with one record of another asker's in it: counted.
        who, other = asker("far", 0.01), asker("random", 0.01)
        readable = set(corpus.readable[who].tolist())
        intruder = next(i for i in corpus.readable[other].tolist() if i not in readable)
        response = http.post(
            "/v1/retrieve", json=peer.request(corpus.queries[0], LIMIT), headers=peer.headers(who)
        )
        tampered = [*peer.returned(response.json())[:-1], intruder]
        assert corpus.leaks(who, tampered) == 1
        anonymous = http.post("/v1/retrieve", json=peer.request(corpus.queries[0], LIMIT))
        assert anonymous.status_code == 401
