"""What a leaf search scores points by: queries whose score belongs to the point.

A probe is one of Qdrant's vector queries with every example given as a vector (the
query engine, reads/query/, has already turned point ids into the vectors of points
the asker may see): nearest, recommend by best score or by the sum of scores,
discover, context. Each scores a point from the point's own vector and the probe
alone, so a leaf search over-fetches with exclusion and decides in rounds exactly as
a dense search does (reads/reader.py): the same point gets the same score in every
round, whatever else the store holds (docs/design.md, "The query engine").

`server` and `edge` translate a probe into each backend's types, as scope.py does for
filters: nothing else translates probes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import qdrant_edge as qe
from qdrant_client.http import models as qm

# A dense vector, or a sparse one (a vector is always one of a collection's named
# vectors: the probe's `using`).
Vector = list[float] | qm.SparseVector


@dataclass(frozen=True)
class Nearest:
    vector: Vector


@dataclass(frozen=True)
class Recommend:
    """Qdrant's `best_score` and `sum_scores` strategies (`average_vector` is a
    `Nearest` of the engine's average, as in Qdrant)."""

    strategy: Literal["best_score", "sum_scores"]
    positive: tuple[Vector, ...]
    negative: tuple[Vector, ...]


@dataclass(frozen=True)
class Pair:
    positive: Vector
    negative: Vector


@dataclass(frozen=True)
class Discover:
    target: Vector
    pairs: tuple[Pair, ...]


@dataclass(frozen=True)
class Context:
    pairs: tuple[Pair, ...]


Probe = Nearest | Recommend | Discover | Context


def is_distance_scored(probe: Probe) -> bool:
    """Whether the score is the collection's distance (smaller is better under
    Euclid and Manhattan); every other probe's score is larger-better (Qdrant's
    `query_result_order`)."""
    return isinstance(probe, Nearest)


# --- Qdrant server (qdrant-client's models) --------------------------------------------


def server(probe: Probe) -> Any:
    """The `query` of a `query_points` call."""
    match probe:
        case Nearest(vector):
            return qm.NearestQuery(nearest=vector)
        case Recommend(strategy, positive, negative):
            return qm.RecommendQuery(
                recommend=qm.RecommendInput(
                    positive=list(positive),
                    negative=list(negative),
                    strategy=qm.RecommendStrategy(strategy),
                )
            )
        case Discover(target, pairs):
            return qm.DiscoverQuery(
                discover=qm.DiscoverInput(target=target, context=[_server_pair(p) for p in pairs])
            )
        case Context(pairs):
            return qm.ContextQuery(context=[_server_pair(p) for p in pairs])


def _server_pair(pair: Pair) -> qm.ContextPair:
    return qm.ContextPair(positive=pair.positive, negative=pair.negative)


# --- the embedded engine ---------------------------------------------------------------


def edge(probe: Probe, using: str) -> qe.Query:
    named = using or None
    match probe:
        case Nearest(vector):
            return qe.Query.Nearest(edge_vector(vector), using=named)
        case Recommend("best_score", positive, negative):
            return qe.Query.RecommendBestScore(_edge_recommend(positive, negative), using=named)
        case Recommend(_, positive, negative):
            return qe.Query.RecommendSumScores(_edge_recommend(positive, negative), using=named)
        case Discover(target, pairs):
            query = qe.DiscoverQuery(edge_vector(target), [_edge_pair(p) for p in pairs])
            return qe.Query.Discover(query, using=named)
        case Context(pairs):
            return qe.Query.Context(qe.ContextQuery([_edge_pair(p) for p in pairs]), using=named)
    raise TypeError(f"not a probe: {probe!r}")


def edge_vector(vector: Vector) -> list[float] | qe.SparseVector:
    if isinstance(vector, qm.SparseVector):
        return qe.SparseVector(list(vector.indices), list(vector.values))
    return vector


def _edge_recommend(
    positive: tuple[Vector, ...], negative: tuple[Vector, ...]
) -> qe.RecommendQuery:
    return qe.RecommendQuery([edge_vector(v) for v in positive], [edge_vector(v) for v in negative])


def _edge_pair(pair: Pair) -> qe.ContextPair:
    return qe.ContextPair(edge_vector(pair.positive), edge_vector(pair.negative))


def rescored_exactly(probe: Probe) -> bool:
    """Whether the store's score of this probe is recomputed here: a sparse nearest
    probe. Qdrant sums a sparse dot product in an order that depends on how it searched
    (its inverted index or point by point, chosen from a cardinality estimate that
    counts every point), so the same point can score a float's last bit apart with
    other points stored beside it; the exact dot product of the point's own weights and
    the probe's is a function of the two alone."""
    return isinstance(probe, Nearest) and isinstance(probe.vector, qm.SparseVector)


def sparse_dot(a: qm.SparseVector, b: qm.SparseVector) -> float:
    weights = dict(zip(a.indices, a.values, strict=True))
    return float(sum(weights.get(i, 0.0) * v for i, v in zip(b.indices, b.values, strict=True)))


def vectors_out(raw: Any, names: frozenset[str]) -> dict[str, Vector]:
    """The named vectors a backend returned (a list for the unnamed vector alone, or
    a dict by name; sparse ones as qdrant-client's or the engine's type), keeping
    `names`."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raw = {"": raw}
    kept: dict[str, Vector] = {}
    for name, value in raw.items():
        if name not in names:
            continue
        if isinstance(value, list):
            kept[name] = [float(x) for x in value]
        elif hasattr(value, "indices") and hasattr(value, "values"):
            kept[name] = qm.SparseVector(indices=list(value.indices), values=list(value.values))
    return kept
