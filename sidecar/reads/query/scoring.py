"""The engine's arithmetic over allowed points: fusion, MMR, averaged examples.

Pure functions of the hits they are given, written from Qdrant's own definitions
(1.18, the version whose ships with; docs/design.md, "The query engine"):

- RRF (`rrf`): a point's score is the sum, over the lists it is in, of
  1 / ((position + 1) / weight + k - 1), position 0-based in each list's order, k 2 by
  default, weight 1 by default (0 or less: no contribution).
- DBSF (`dbsf`): each list's scores normalised to (s - (μ - 3 sd)) / 6 sd, with the mean μ
  and the sample standard deviation sd of that list (one point: 0.5; all equal: 0.5),
  then summed per point.
- MMR (`mmr`): greedy; first the candidate most similar to the query, then each time
  the one maximising λ·sim(query, c) - (1 - λ)·max sim(c, chosen), λ = 1 - diversity
  (0.5 by default), similarities raw in the vector's distance (cosine and dot: the dot
  product of the normalised or the plain vectors; Euclid: minus the squared distance;
  Manhattan: minus the L1 distance; sparse: the dot product). The chosen points keep
  their original scores, in the order chosen. Fewer than two candidates: returned as
  they are.
- `average`: the mean of the positive examples, and with negatives 2·mean(positive) -
  mean(negative), dimension by dimension (sparse: over the union of indices).

Ties (equal scores) are broken by `point_order` of the ids, so an answer is a function
of the allowed points alone; Qdrant's own order among ties is unspecified.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from qdrant_client.http import models as qm

from sidecar.reads.query.collection import Hit, T, point_order
from sidecar.store.probes import Vector

DEFAULT_RRF_K = 2
DEFAULT_MMR_DIVERSITY = 0.5


def ranked(hits: list[Hit[T]], smaller_better: bool = False) -> list[Hit[T]]:
    """Best first by score (largest, or smallest for a distance), ties by id."""
    sign = 1.0 if smaller_better else -1.0
    return sorted(hits, key=lambda h: (sign * h.score, point_order(h.id)))


def rrf(sources: Sequence[list[Hit[T]]], k: int, weights: Sequence[float] | None) -> list[Hit[T]]:
    fused: dict[object, tuple[Hit[T], float]] = {}
    for index, source in enumerate(sources):
        weight = 1.0 if weights is None else float(weights[index])
        for position, hit in enumerate(source):
            share = 0.0 if weight <= 0 else 1.0 / ((position + 1) / weight + k - 1)
            first, total = fused.get(hit.id, (hit, 0.0))
            fused[hit.id] = (first, total + share)
    return ranked([_rescored(hit, score) for hit, score in fused.values()])


def dbsf(sources: Sequence[list[Hit[T]]]) -> list[Hit[T]]:
    fused: dict[object, tuple[Hit[T], float]] = {}
    for source in sources:
        for hit, score in zip(
            source, _distribution_normalised([h.score for h in source]), strict=True
        ):
            first, total = fused.get(hit.id, (hit, 0.0))
            fused[hit.id] = (first, total + score)
    return ranked([_rescored(hit, score) for hit, score in fused.values()])


def _distribution_normalised(scores: list[float]) -> list[float]:
    if len(scores) < 2:
        return [0.5 for _ in scores]
    mean = sum(scores) / len(scores)
    variance = sum((s - mean) ** 2 for s in scores) / (len(scores) - 1)
    low, high = mean - 3 * math.sqrt(variance), mean + 3 * math.sqrt(variance)
    if low == high:
        return [0.5 for _ in scores]
    return [(s - low) / (high - low) for s in scores]


def _rescored(hit: Hit[T], score: float) -> Hit[T]:
    return Hit(hit.id, score, hit.payload, hit.vectors, hit.item, None)


def mmr(
    candidates: list[Hit[T]],
    query: Vector,
    using: str,
    distance: qm.Distance | None,
    diversity: float | None,
    limit: int,
) -> list[Hit[T]]:
    """`limit` candidates chosen by maximal marginal relevance (see the module);
    `distance` None for a sparse vector. Candidates without the vector are dropped,
    each point counts once (its first appearance)."""
    unique: dict[object, Hit[T]] = {}
    for hit in candidates:
        if hit.id not in unique and using in hit.vectors:
            unique[hit.id] = hit
    pool = list(unique.values())
    if len(pool) < 2 or limit <= 0:
        return pool if limit > 0 else []
    lam = 1.0 - (DEFAULT_MMR_DIVERSITY if diversity is None else diversity)
    everything = _similarities([query, *(hit.vectors[using] for hit in pool)], distance)
    relevance, matrix = everything[0, 1:], everything[1:, 1:]
    order = [point_order(hit.id) for hit in pool]
    remaining = list(range(len(pool)))
    first = max(remaining, key=lambda i: (relevance[i], _reversed(order[i])))
    chosen = [first]
    remaining.remove(first)
    closest = matrix[first].copy()
    while len(chosen) < limit and remaining:
        best = max(
            remaining,
            key=lambda i: (lam * relevance[i] - (1 - lam) * closest[i], _reversed(order[i])),
        )
        chosen.append(best)
        remaining.remove(best)
        closest = np.maximum(closest, matrix[best])
    return [pool[i] for i in chosen]


def _reversed(order: tuple[int, int, str]) -> tuple[int, int, tuple[int, ...]]:
    """A key under which `max` prefers the smaller id among equals."""
    kind, number, text = order
    return (-kind, -number, tuple(-ord(c) for c in text))


def _similarities(vectors: list[Vector], distance: qm.Distance | None) -> Any:
    """The matrix of raw pairwise similarities (see the module)."""
    if isinstance(vectors[0], qm.SparseVector):
        columns = sorted({i for v in vectors if isinstance(v, qm.SparseVector) for i in v.indices})
        where = {index: n for n, index in enumerate(columns)}
        m = np.zeros((len(vectors), len(columns)))
        for row, vector in enumerate(vectors):
            assert isinstance(vector, qm.SparseVector)
            for i, v in zip(vector.indices, vector.values, strict=True):
                m[row, where[i]] = v
        return m @ m.T
    m = np.array(vectors, dtype=np.float64)
    if distance == qm.Distance.COSINE:
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        m = np.divide(m, norms, out=np.zeros_like(m), where=norms > 0)
    if distance in (qm.Distance.COSINE, qm.Distance.DOT):
        return m @ m.T
    if distance == qm.Distance.EUCLID:
        squares = (m**2).sum(axis=1)
        return -np.maximum(squares[:, None] + squares[None, :] - 2 * (m @ m.T), 0.0)
    # Manhattan, a row at a time (the whole difference tensor would be n²·d).
    return np.array([-np.abs(m - row).sum(axis=1) for row in m])


def average(positive: Sequence[Vector], negative: Sequence[Vector]) -> Vector:
    """Qdrant's `average_vector` recommendation query (see the module). The caller
    has checked that there is a positive example and that all are of one kind."""
    mean_positive = _mean(positive)
    if not negative:
        return mean_positive
    mean_negative = _mean(negative)
    if isinstance(mean_positive, qm.SparseVector) and isinstance(mean_negative, qm.SparseVector):
        pos = dict(zip(mean_positive.indices, mean_positive.values, strict=True))
        neg = dict(zip(mean_negative.indices, mean_negative.values, strict=True))
        keys = sorted(pos.keys() | neg.keys())
        values = [2 * pos.get(i, 0.0) - neg.get(i, 0.0) for i in keys]
        return qm.SparseVector(indices=keys, values=values)
    assert isinstance(mean_positive, list)
    assert isinstance(mean_negative, list)
    return [2 * p - n for p, n in zip(mean_positive, mean_negative, strict=True)]


def _mean(vectors: Sequence[Vector]) -> Vector:
    if isinstance(vectors[0], qm.SparseVector):
        sums: dict[int, float] = {}
        for vector in vectors:
            assert isinstance(vector, qm.SparseVector)
            for i, v in zip(vector.indices, vector.values, strict=True):
                sums[i] = sums.get(i, 0.0) + v
        keys = sorted(sums)
        return qm.SparseVector(indices=keys, values=[sums[i] / len(vectors) for i in keys])
    dense = np.array(vectors, dtype=np.float64)
    return [float(x) for x in dense.mean(axis=0)]
