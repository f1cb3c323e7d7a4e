"""Recall@10 of filtered vector search under different search settings, in-process.

    .venv/bin/python bench/search_settings.py [--records 100000] [--queries 200]

The readable-fraction sweep's corpus (sidecar/bench/corpus.py: 384-dim clustered
vectors, askers who may read 20 % or 90 % of them, far from the queries or at
random) goes straight into an embedded engine (qdrant-edge, the store `whose` embeds),
each point carrying the askers who may read it in a keyword-indexed field; HNSW is
built, and each asker's queries are run with that field as the filter under each
setting: HNSW with beam 100 (Qdrant's default) to 800, ACORN (Qdrant's filtered
traversal for filters that cut the graph) at beams 100 to 400, and exact search.
Per asker and setting: mean recall@10 against exact cosine search over the asker's
records (numpy), and the p50 of one query. `--payload-m 16` builds the index with
per-value links as well. docs/operations.md ("What bounds recall@10") has a run.

No policy and no HTTP: this isolates what the engine's search finds, which the
sidecar and the plain-store passthrough share (WHOSE_SEARCH_*).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import qdrant_edge as qe

from sidecar.bench.corpus import LIMIT, Corpus, asker, build

FIELD = "readers"
ASKERS = [asker(layout, fraction) for layout in ("far", "random") for fraction in (0.20, 0.90)]


def settings() -> list[tuple[str, qe.SearchParams | None]]:
    acorn = qe.AcornSearchParams(enable=True, max_selectivity=1.0)
    return [
        *((f"hnsw beam {ef}", qe.SearchParams(hnsw_ef=ef)) for ef in (100, 200, 400, 800)),
        *((f"acorn beam {ef}", qe.SearchParams(hnsw_ef=ef, acorn=acorn)) for ef in (100, 200, 400)),
        ("exact", qe.SearchParams(exact=True)),
    ]


def load(corpus: Corpus, path: Path, payload_m: int | None) -> qe.EdgeShard:
    hnsw = None
    if payload_m is not None:
        hnsw = qe.HnswIndexConfig(
            m=16, ef_construct=100, full_scan_threshold=10_000, payload_m=payload_m
        )
    config = qe.EdgeConfig(
        vectors=qe.EdgeVectorParams(size=corpus.vectors.shape[1], distance=qe.Distance.Cosine),
        hnsw_config=hnsw,
    )
    shard = qe.EdgeShard.create(str(path), config)
    shard.update(qe.UpdateOperation.create_field_index(FIELD, qe.KeywordIndexParams()))
    readers: list[list[str]] = [[] for _ in range(len(corpus.vectors))]
    for who in ASKERS:
        for i in corpus.readable[who].tolist():
            readers[i].append(who)
    for start in range(0, len(readers), 2000):
        points = [
            qe.Point(i, corpus.vectors[i].tolist(), {FIELD: readers[i]})
            for i in range(start, min(start + 2000, len(readers)))
        ]
        shard.update(qe.UpdateOperation.upsert_points(points))
    shard.optimize()
    return shard


def measure(shard: qe.EdgeShard, corpus: Corpus, who: str, params: qe.SearchParams | None) -> str:
    only = qe.Filter(must=[qe.FieldCondition(key=FIELD, match=qe.MatchValue(who))])
    found, times = [], []
    for q, query in enumerate(corpus.queries):
        request = qe.QueryRequest(
            limit=LIMIT, query=qe.Query.Nearest(query.tolist()), filter=only, params=params
        )
        started = time.perf_counter()
        points = shard.query(request)
        times.append((time.perf_counter() - started) * 1000)
        found.append(corpus.recall_at_10(who, q, [int(p.id) for p in points]))
    return f"recall@10 {statistics.mean(found):.3f}  p50 {statistics.median(times):.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--payload-m", type=int, default=None)
    args = parser.parse_args()
    corpus = build(args.records, args.queries)
    with tempfile.TemporaryDirectory(prefix="whose-search-") as folder:
        started = time.perf_counter()
        shard = load(corpus, Path(folder) / "edge", args.payload_m)
        print(f"{args.records} records loaded and indexed in {time.perf_counter() - started:.0f} s")
        try:
            for who in ASKERS:
                for name, params in settings():
                    figures = measure(shard, corpus, who, params)
                    print(f"{who:>10}  {name:<15} {figures}", flush=True)
        finally:
            shard.close()


if __name__ == "__main__":
    main()
