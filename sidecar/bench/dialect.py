"""The drop-in path: the sweep's cells through the Qdrant dialect on a stack's own
collection, beside the same query sent to Qdrant directly (`whose bench --dialect`).

A Qdrant server (processes.qdrant) and `whose serve` on it (WHOSE_STORE=server). The
sweep's corpus (corpus.py) goes twice into the same server: into a stack collection
`kb` created through the sidecar (LangChain-shaped points: `page_content`, and
`metadata.audience` naming who may read each, which the labeling policy reads; ids the
record numbers), and into a plain collection created on Qdrant directly, with a keyword
index on `metadata.audience`. Per cell, as that cell's asker: `POST
/collections/kb/points/query` (limit 10, with payload) through the sidecar, and the
same query on Qdrant directly with the asker's audience as its filter (what a plain
Qdrant user would filter on), one at a time and interleaved query by query, so load on
the machine falls on both alike; then throughput at 8 in flight and the server CPU per
query (the sidecar; Qdrant's own for the direct path), recall@10 and leaks of both.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import httpx

from sidecar.bench.corpus import DIM, LIMIT, WRITER, Corpus, asker, cells, headers
from sidecar.bench.measure import closed_loop, summary
from sidecar.bench.processes import Proc, qdrant, sidecar

COLLECTION = "kb"
DIRECT = "kb_direct"
BATCH = 256
IN_FLIGHT = 8


def _points(corpus: Corpus) -> list[dict[str, Any]]:
    audiences = corpus.audiences()
    return [
        {
            "id": i,
            "vector": corpus.vectors[i].tolist(),
            "payload": {
                "page_content": f"bench record {i}",
                "metadata": {"audience": audiences[i], "source": f"bench-{i % 500}.md"},
            },
        }
        for i in range(len(corpus.vectors))
    ]


def _load(http: httpx.Client, name: str, corpus: Corpus) -> None:
    config = {"vectors": {"size": DIM, "distance": "Cosine"}}
    http.put(f"/collections/{name}", json=config).raise_for_status()
    made = _points(corpus)
    for start in range(0, len(made), BATCH):
        body = {"points": made[start : start + BATCH]}
        response = http.put(f"/collections/{name}/points?wait=true", json=body)
        if response.status_code != 200:
            raise RuntimeError(f"load refused: {response.status_code} {response.text[:500]}")


def _settled(server: str, n: int) -> list[int]:
    """Until both collections hold every point and the server's optimizers are done
    with them (green); the vectors each has indexed (HNSW is built only for segments
    past Qdrant's indexing threshold, the same for both: below it Qdrant scans)."""
    deadline = time.monotonic() + 1800
    with httpx.Client(base_url=server, timeout=60) as http:
        while time.monotonic() < deadline:
            names = [c["name"] for c in http.get("/collections").json()["result"]["collections"]]
            infos = [http.get(f"/collections/{name}").json()["result"] for name in names]
            sized = [i for i in infos if (i.get("points_count") or 0) >= n]
            if len(sized) >= 2 and all(i["status"] == "green" for i in sized):
                return [int(i.get("indexed_vectors_count") or 0) for i in sized]
            time.sleep(1)
    raise RuntimeError("Qdrant did not take the points")


def returned(body: dict[str, Any]) -> list[int]:
    """The record numbers of a query answer (the ids written, answered back as
    integers by both); an id that is none of them counts as -1."""
    return [p["id"] if isinstance(p["id"], int) else -1 for p in body["result"]["points"]]


def _cell(proxy: Proc, server: Proc, corpus: Corpus, who: str, n: int) -> dict[str, Any]:
    def body(i: int, direct: bool) -> dict[str, Any]:
        query: dict[str, Any] = {
            "query": corpus.queries[i % len(corpus.queries)].tolist(),
            "limit": LIMIT,
            "with_payload": True,
        }
        if direct:
            readers = {"key": "metadata.audience", "match": {"any": [who]}}
            query["filter"] = {"must": [readers]}
        return query

    paths = {
        "sidecar": (f"{proxy.base}/collections/{COLLECTION}/points/query", headers(who), False),
        "direct": (f"{server.base}/collections/{DIRECT}/points/query", {}, True),
    }
    times: dict[str, list[float]] = {name: [] for name in paths}
    answers: dict[str, list[list[int]]] = {name: [] for name in paths}
    with httpx.Client(timeout=60) as http:
        for url, sent, direct in paths.values():  # the connections
            http.post(url, json=body(0, direct), headers=sent).raise_for_status()
        for i in range(n):
            for name, (url, sent, direct) in paths.items():
                started = time.perf_counter()
                response = http.post(url, json=body(i, direct), headers=sent)
                times[name].append(time.perf_counter() - started)
                response.raise_for_status()
                answers[name].append(returned(response.json()))
    result: dict[str, Any] = {}
    for name, (url, sent, direct) in paths.items():

        async def send(http: httpx.AsyncClient, i: int) -> httpx.Response:
            return await http.post(url, json=body(i, direct), headers=sent)  # noqa: B023

        # The sidecar's path costs its own CPU and Qdrant's; the direct one Qdrant's.
        measured = {"sidecar": proxy, "qdrant": server} if name == "sidecar" else {"qdrant": server}
        result[name] = summary(times[name]) | {
            "recall_at_10": corpus.quality(who, answers[name]),
            "throughput": closed_loop(send, 2 * n, IN_FLIGHT, measured),
        }
    result["p50_ratio"] = round(result["sidecar"]["p50_ms"] / result["direct"]["p50_ms"], 2)
    return result


def measure(
    corpus: Corpus, n_queries: int, workdir: Path, binary: Path
) -> dict[str, dict[str, Any]]:
    """Per cell (asker), the dialect through the sidecar and Qdrant directly."""
    cell_results: dict[str, dict[str, Any]] = {}
    with contextlib.ExitStack() as running:
        # Resolved here: the server starts in a folder of its own.
        server = running.enter_context(qdrant(binary.resolve(), workdir / "qdrant"))
        env = {"WHOSE_STORE": "server", "WHOSE_QDRANT_URL": server.base}
        proxy = running.enter_context(sidecar(workdir / "whose", env=env))
        with httpx.Client(base_url=proxy.base, headers=headers(WRITER), timeout=600) as http:
            _load(http, COLLECTION, corpus)
        with httpx.Client(base_url=server.base, timeout=600) as http:
            _load(http, DIRECT, corpus)
            index = {"field_name": "metadata.audience", "field_schema": "keyword"}
            http.put(f"/collections/{DIRECT}/index?wait=true", json=index).raise_for_status()
        indexed = _settled(server.base, len(corpus.vectors))
        for layout, fraction in cells():
            who = asker(layout, fraction)
            cell = {"layout": layout, "fraction": fraction, "indexed_vectors": indexed}
            cell_results[who] = cell | _cell(proxy, server, corpus, who, n_queries)
    return cell_results
