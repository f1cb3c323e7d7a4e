"""The sweep's corpus: 384-dim clustered vectors, and askers who may read exactly a
given fraction of them, laid out either far from the queries or at random.

Records sit in `CLUSTERS` clusters of equal size around random centres; the queries
come from the first `NEAR` clusters (a tenth of the records). For each readable
fraction f there are two askers, each in the audience of exactly round(f * n)
records:

- `far-<pct>` reads records of the other clusters, farthest cluster first: every
  permitted neighbour is far from the query (the hard case for a filtered HNSW
  search: the graph around the query holds nothing the asker may read);
- `random-<pct>` reads records drawn at random.

Every record is written by `WRITER` (in every audience, never an asker) as a plain
assertion with no proposition key, so no record supersedes another and the policy
admits a record exactly when its audience names the asker: the truth for recall@10
is exact cosine search over the asker's records (`Corpus.truth`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import httpx
import numpy as np
import orjson

from sidecar.record import iso

if TYPE_CHECKING:
    from sidecar.store import Store

FRACTIONS = (0.01, 0.05, 0.20, 0.90)
LAYOUTS = ("far", "random")
CLUSTERS = 50
NEAR = 5  # clusters the queries come from: a tenth of the records
DIM = 384
LIMIT = 10
TENANT = "acme"
WRITER = "librarian"
# Noise around a centre, per coordinate: about 0.75 of the centre's length in all, so
# a cluster's members have cosine about 0.65 with each other and about 0 with others.
NOISE = 0.75 / np.sqrt(DIM)
# Records per write request (the API takes up to 1000: writes/writer.py MAX_BATCH).
BATCH = 500


def asker(layout: str, fraction: float) -> str:
    return f"{layout}-{round(fraction * 100)}"


def cells() -> list[tuple[str, float]]:
    return [(layout, fraction) for layout in LAYOUTS for fraction in FRACTIONS]


def headers(who: str) -> dict[str, str]:
    return {"X-Whose-Asker": who, "X-Whose-Tenant": TENANT}


@dataclass(frozen=True)
class Corpus:
    vectors: np.ndarray[Any, np.dtype[np.float64]]  # (n, DIM), unit length, as sent
    queries: np.ndarray[Any, np.dtype[np.float64]]  # (q, DIM), unit length
    readable: dict[str, np.ndarray[Any, np.dtype[np.int64]]]  # asker -> record indices

    def audiences(self) -> list[list[str]]:
        audience: list[list[str]] = [[WRITER] for _ in range(len(self.vectors))]
        for who, indices in self.readable.items():
            for i in indices:
                audience[int(i)].append(who)
        return audience

    def bodies(self) -> Iterator[dict[str, Any]]:
        """POST /v1/memories bodies, in record order."""
        for i, (vector, audience) in enumerate(zip(self.vectors, self.audiences(), strict=True)):
            yield {
                "content": f"bench record {i}",
                "observer_id": WRITER,
                "source_id": f"bench-{i % 500}",
                "source": {"kind": "conversation", "speaker": WRITER},
                "modality": "asserted",
                "confidence": 0.8,
                "audience": audience,
                "vector": vector,
            }

    def truth(self, who: str, query: int) -> tuple[set[int], float]:
        """The asker's LIMIT nearest records to a query by exact cosine (numpy, over
        just the records they may read), and the LIMIT-th best score."""
        indices = self.readable[who]
        scores = self.vectors[indices] @ self.queries[query]
        top = np.argsort(-scores)[:LIMIT]
        return {int(indices[t]) for t in top}, float(scores[top[-1]])

    def recall_at_10(self, who: str, query: int, returned: list[int]) -> float:
        """Share of the true LIMIT nearest found. Ties count: a returned record the
        asker may read that scores at least the LIMIT-th best score is a hit."""
        _, tenth = self.truth(who, query)
        allowed = set(self.readable[who].tolist())
        hits = sum(
            i in allowed and float(self.vectors[i] @ self.queries[query]) >= tenth - 1e-5
            for i in returned[:LIMIT]
        )
        return hits / min(LIMIT, len(allowed))

    def leaks(self, who: str, returned: list[int]) -> int:
        """How many returned records the asker may not read (an index outside the
        corpus, -1 for an id the system under test made up, counts as one)."""
        allowed = set(self.readable[who].tolist())
        return sum(i not in allowed for i in returned)

    def quality(self, who: str, answers: list[list[int]]) -> dict[str, Any]:
        """recall@10 (mean, worst) and leaks over the answers to queries 0, 1, ... in
        turn (`answers[q]`: the record indices returned for query q mod the queries)."""
        found = [
            self.recall_at_10(who, q % len(self.queries), returned)
            for q, returned in enumerate(answers)
        ]
        return {
            "mean": round(float(np.mean(found)), 4),
            "min": round(min(found), 2),
            "leaks": sum(self.leaks(who, returned) for returned in answers),
        }


def _unit(rows: np.ndarray[Any, np.dtype[np.float64]]) -> np.ndarray[Any, np.dtype[np.float64]]:
    unit: np.ndarray[Any, np.dtype[np.float64]] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return unit


def build(n: int, n_queries: int, seed: int = 7) -> Corpus:
    rng = np.random.default_rng(seed)
    centres = _unit(rng.standard_normal((CLUSTERS, DIM)))
    cluster = rng.permutation(np.arange(n) % CLUSTERS)
    # Rounded as sent over JSON, so the truth is computed on what the store holds.
    vectors = _unit(centres[cluster] + NOISE * rng.standard_normal((n, DIM))).round(5)
    near = rng.integers(0, NEAR, n_queries)
    queries = _unit(centres[near] + NOISE * rng.standard_normal((n_queries, DIM)))
    # Far: clusters the queries never come from, the highest-numbered first.
    far_order = np.array(
        sorted(np.flatnonzero(cluster >= NEAR), key=lambda i: (-cluster[i], i)), dtype=np.int64
    )
    readable: dict[str, np.ndarray[Any, np.dtype[np.int64]]] = {}
    for fraction in FRACTIONS:
        count = round(fraction * n)
        readable[asker("far", fraction)] = np.sort(far_order[:count])
        readable[asker("random", fraction)] = np.sort(rng.choice(n, count, replace=False))
    return Corpus(vectors, queries, readable)


async def put(store: Store, corpus: Corpus) -> None:
    """The corpus stored straight into a store (no sidecar) as records of tenant acme,
    each readable by its audience, its position in the corpus as `index`; by thousands.
    Times and sources vary as in records a sidecar writes (`load`): a time a millisecond
    apart from the last, one of 500 sources. An index over fields that all hold one
    value shapes the search graph differently (docs/performance.md, round eight)."""
    audiences = corpus.audiences()
    n = len(corpus.vectors)
    for start in range(0, n, 1000):
        items = [
            (
                {
                    "id": str(uuid.UUID(int=i + 1)),
                    "tenant": "acme",
                    "valid_at": (at := _written(i)),
                    "recorded_at": at,
                    "source_id": f"bench-{i % 500}",
                    "audience": audiences[i],
                    "index": i,
                },
                {"": corpus.vectors[i].tolist()},
            )
            for i in range(start, min(n, start + 1000))
        ]
        await store.put("acme", items)


_FIRST_WRITE = datetime(2026, 10, 1, tzinfo=UTC)


def _written(i: int) -> str:
    """When `put` says record i was written: a millisecond after the one before."""
    return iso(_FIRST_WRITE + timedelta(milliseconds=i))


def load(base: str, corpus: Corpus) -> list[str]:
    """Write every record through `POST /v1/memories` as WRITER, BATCH a request: the
    write policy, record building and the store write all run as for any caller
    (the fastest honest route; JSON by orjson; see sweep.py for the OPA timeout).
    Returns the record ids in order."""
    ids: list[str] = []
    batch: list[dict[str, Any]] = []
    with httpx.Client(timeout=600) as http:

        def flush() -> None:
            ids.extend(write(http, base, batch))
            batch.clear()

        for body in corpus.bodies():
            batch.append(body)
            if len(batch) == BATCH:
                flush()
        if batch:
            flush()
    return ids


def write(http: httpx.Client, base: str, bodies: list[dict[str, Any]]) -> list[str]:
    """One `POST /v1/memories` of `bodies` as WRITER (JSON by orjson, vectors as numpy
    arrays); the ids written, in order."""
    response = http.post(
        f"{base}/v1/memories",
        content=orjson.dumps(bodies, option=orjson.OPT_SERIALIZE_NUMPY),
        headers=headers(WRITER) | {"Content-Type": "application/json"},
    )
    if response.status_code != 201:
        raise RuntimeError(f"load refused: {response.status_code} {response.text[:500]}")
    return [r["id"] for r in response.json()["records"]]


def timed_load(base: str, corpus: Corpus) -> tuple[list[str], float]:
    started = time.perf_counter()
    ids = load(base, corpus)
    return ids, time.perf_counter() - started
