"""Qdrant's older search, recommend and discover bodies, as Query API requests.

qdrant-client 1.16 and later no longer send (or model) `points/search`,
`points/recommend` and `points/discover`, but pinned clients and other languages'
clients still do; Qdrant 1.19 deprecates them. Their bodies are modelled here from
Qdrant 1.18's OpenAPI document and answered as the query each stands for, as Qdrant
itself does: a search is a nearest query on the named vector; a recommendation a
`recommend` query (its strategy, `using`, `lookup_from`); a discovery a `discover`
query with a target, else a `context` query. Their answers are lists of points (the
transport shapes them; reads/query/engine.py computes them).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from qdrant_client.http import models as qm

from sidecar.reads.query.plan import refused

# A point id, a dense vector or a sparse one (Qdrant's RecommendExample).
Example = qm.ExtendedPointId | list[float] | qm.SparseVector


class NamedVector(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    vector: list[float]


class NamedSparseVector(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    vector: qm.SparseVector


class _Body(BaseModel):
    # A field this sidecar does not know is refused, not ignored.
    model_config = ConfigDict(extra="forbid")

    shard_key: qm.ShardKeySelector | None = None
    filter: qm.Filter | None = None
    params: qm.SearchParams | None = None
    with_payload: qm.WithPayloadInterface | None = None
    with_vector: qm.WithVector | None = None
    score_threshold: float | None = None


class SearchRequest(_Body):
    vector: list[float] | NamedVector | NamedSparseVector
    limit: int = Field(ge=1)
    offset: int | None = Field(default=None, ge=0)


class SearchRequestBatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    searches: list[SearchRequest]


class _Grouping(BaseModel):
    group_by: str
    group_size: int = Field(ge=1)
    limit: int = Field(ge=1)
    with_lookup: qm.WithLookupInterface | None = None


class SearchGroupsRequest(_Body, _Grouping):
    vector: list[float] | NamedVector | NamedSparseVector


class _Recommendation(_Body):
    positive: list[Example] = Field(default_factory=list)
    negative: list[Example] = Field(default_factory=list)
    strategy: qm.RecommendStrategy | None = None
    using: str | None = None
    lookup_from: qm.LookupLocation | None = None


class RecommendRequest(_Recommendation):
    limit: int = Field(ge=1)
    offset: int | None = Field(default=None, ge=0)


class RecommendRequestBatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    searches: list[RecommendRequest]


class RecommendGroupsRequest(_Recommendation, _Grouping):
    pass


class ContextExamplePair(BaseModel):
    model_config = ConfigDict(extra="forbid")

    positive: Example
    negative: Example


class DiscoverRequest(_Body):
    target: Example | None = None
    context: list[ContextExamplePair] | None = None
    limit: int = Field(ge=1)
    offset: int | None = Field(default=None, ge=0)
    using: str | None = None
    lookup_from: qm.LookupLocation | None = None


class DiscoverRequestBatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    searches: list[DiscoverRequest]


def _common(body: _Body) -> dict[str, Any]:
    return {
        "shard_key": body.shard_key,
        "filter": body.filter,
        "params": body.params,
        "with_payload": body.with_payload,
        "with_vector": body.with_vector,
        "score_threshold": body.score_threshold,
    }


def _vector(raw: list[float] | NamedVector | NamedSparseVector) -> tuple[Any, str | None]:
    if isinstance(raw, NamedVector | NamedSparseVector):
        return raw.vector, raw.name
    return raw, None


def search(body: SearchRequest) -> qm.QueryRequest:
    vector, using = _vector(body.vector)
    return qm.QueryRequest(
        query=qm.NearestQuery(nearest=vector),
        using=using,
        limit=body.limit,
        offset=body.offset,
        **_common(body),
    )


def search_groups(body: SearchGroupsRequest) -> qm.QueryGroupsRequest:
    vector, using = _vector(body.vector)
    return qm.QueryGroupsRequest(
        query=qm.NearestQuery(nearest=vector),
        using=using,
        group_by=body.group_by,
        group_size=body.group_size,
        limit=body.limit,
        with_lookup=body.with_lookup,
        **_common(body),
    )


def _recommend_query(body: _Recommendation) -> qm.RecommendQuery:
    strategy = body.strategy or qm.RecommendStrategy.AVERAGE_VECTOR
    if strategy == qm.RecommendStrategy.AVERAGE_VECTOR and not body.positive:
        raise refused("Bad request: At least one positive vector ID required with this strategy")
    if not body.positive and not body.negative:
        raise refused(
            "Bad request: At least one positive or negative vector ID required with this strategy"
        )
    return qm.RecommendQuery(
        recommend=qm.RecommendInput(
            positive=list(body.positive), negative=list(body.negative), strategy=strategy
        )
    )


def recommend(body: RecommendRequest) -> qm.QueryRequest:
    return qm.QueryRequest(
        query=_recommend_query(body),
        using=body.using,
        lookup_from=body.lookup_from,
        limit=body.limit,
        offset=body.offset,
        **_common(body),
    )


def recommend_groups(body: RecommendGroupsRequest) -> qm.QueryGroupsRequest:
    return qm.QueryGroupsRequest(
        query=_recommend_query(body),
        using=body.using,
        lookup_from=body.lookup_from,
        group_by=body.group_by,
        group_size=body.group_size,
        limit=body.limit,
        with_lookup=body.with_lookup,
        **_common(body),
    )


def discover(body: DiscoverRequest) -> qm.QueryRequest:
    pairs = [qm.ContextPair(positive=p.positive, negative=p.negative) for p in body.context or []]
    query: qm.DiscoverQuery | qm.ContextQuery
    if body.target is not None:
        query = qm.DiscoverQuery(discover=qm.DiscoverInput(target=body.target, context=pairs))
    elif pairs:
        query = qm.ContextQuery(context=pairs)
    else:
        raise refused("Bad request: target or context must be provided")
    return qm.QueryRequest(
        query=query,
        using=body.using,
        lookup_from=body.lookup_from,
        limit=body.limit,
        offset=body.offset,
        **_common(body),
    )
