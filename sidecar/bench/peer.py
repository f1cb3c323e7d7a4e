"""The peer whose bench measures whose against: `wardowl` (PyPI, the `bench` extra), the
permission-aware retrieval library a user would pick instead, served over HTTP by its
own FastAPI app (`wardowl.server.create_app`) on the same engine as whose's embedded
store: Qdrant's own, in-process (qdrant-edge-py), with the same HNSW defaults.

Same data and same access rules: every record of the sweep's corpus (corpus.py), its
vector as sent to whose, stored the way wardowl's Qdrant backend stores a chunk
(`wardowl_id`, `page_content`, `metadata.allowed_users`), its audience as the users
allowed to read it; wardowl's `MetadataACLAuthorizer` admits a chunk exactly when its
`allowed_users` names the subject, as whose's policy admits a sweep record exactly when
its audience names the asker. wardowl puts that filter inside the search (its
`prefilter` strategy, Qdrant deciding HNSW or a scan from its own estimate) and checks
every hit again before returning it.

Its identity is the bearer token taken as the user's name, as `whose serve --dev` takes
the X-Whose-Asker header: neither side verifies a signature in the bench.

The engine is reached through `EdgeClient`, the few qdrant-client calls wardowl's
backend makes (upsert, query_points), answered by the embedded shard with the filter
translated by the embedded store's own translation (store/edge.py `to_edge`).

python -m sidecar.bench.peer --data-dir D --port P
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe
from qdrant_client.http import models as qm
from wardowl import Document, MetadataACLAuthorizer, PermissionedRetriever, Subject
from wardowl.backends.qdrant import ID_KEY, QdrantBackend

from sidecar.bench.corpus import DIM, Corpus
from sidecar.store.edge import to_edge

COLLECTION = "kb"
# wardowl's Qdrant layout: the metadata under this key, its permission fields indexed.
INDEXED = ("metadata.allowed_users", "metadata.allowed_groups", ID_KEY)
# Points per write, as wardowl's own backend batches them.
BATCH = 256


@dataclass(frozen=True)
class _Point:
    id: str
    payload: dict[str, Any] | None
    score: float


@dataclass(frozen=True)
class _Answer:
    points: list[_Point]


class EdgeClient:
    """The qdrant-client calls wardowl's `QdrantBackend` makes, on an embedded shard."""

    def __init__(self, shard: qe.EdgeShard) -> None:
        self.shard = shard

    def upsert(self, collection_name: str, points: list[qm.PointStruct], wait: bool) -> None:
        made = [qe.Point(str(p.id), _dense(p.vector), p.payload or {}) for p in points]
        self.shard.update(qe.UpdateOperation.upsert_points(made))

    def query_points(
        self,
        collection_name: str,
        query: list[float],
        using: str | None,
        query_filter: qm.Filter | None,
        search_params: qm.SearchParams | None,
        limit: int,
        with_payload: bool,
    ) -> _Answer:
        params = None
        if search_params is not None:
            params = qe.SearchParams(hnsw_ef=search_params.hnsw_ef, exact=bool(search_params.exact))
        request = qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest(list(query)),
            filter=None if query_filter is None else to_edge(query_filter),
            params=params,
            with_payload=with_payload,
            with_vector=False,
        )
        found = self.shard.query(request)
        return _Answer([_Point(str(p.id), p.payload, p.score) for p in found])


def _dense(vector: Any) -> list[float]:
    if not isinstance(vector, list):
        raise TypeError("the peer's points carry one unnamed dense vector")
    return [float(x) for x in vector]


def build(folder: Path, corpus: Corpus) -> None:
    """The peer's store in `folder`: every record of `corpus` written through wardowl's
    backend (`QdrantBackend.add`, its ids and payload), its permission fields indexed
    first, then HNSW built, as whose's store is before it serves."""
    shard = qe.EdgeShard.create(
        str(folder),
        qe.EdgeConfig(vectors=qe.EdgeVectorParams(size=DIM, distance=qe.Distance.Cosine)),
    )
    try:
        for field in INDEXED:
            shard.update(qe.UpdateOperation.create_field_index(field, qe.PayloadSchemaType.Keyword))
        backend = QdrantBackend(EdgeClient(shard), COLLECTION)
        audiences = corpus.audiences()
        for start in range(0, len(corpus.vectors), BATCH):
            rows = range(start, min(start + BATCH, len(corpus.vectors)))
            documents = [
                Document(str(i), f"bench record {i}", {"allowed_users": audiences[i]}) for i in rows
            ]
            backend.add(documents, [corpus.vectors[i].tolist() for i in rows])
        shard.optimize()
        shard.flush()
    finally:
        shard.close()


def returned(body: dict[str, Any]) -> list[int]:
    """The record indices a `POST /v1/retrieve` answer holds (the corpus's own numbers,
    the ids `build` wrote), best first; an id that is none of them counts as -1."""
    out = []
    for hit in body["hits"]:
        text = str(hit["id"])
        out.append(int(text) if text.isdigit() else -1)
    return out


def request(vector: np.ndarray[Any, np.dtype[np.float64]], k: int) -> dict[str, Any]:
    return {"vector": vector.tolist(), "k": k}


def headers(who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {who}"}


def app(folder: Path) -> Any:
    """wardowl's own HTTP service on the shard in `folder`."""
    import contextlib
    from collections.abc import AsyncIterator

    from wardowl.server import create_app

    shard = qe.EdgeShard.load(str(folder))
    retriever = PermissionedRetriever(
        QdrantBackend(EdgeClient(shard), COLLECTION), MetadataACLAuthorizer()
    )

    async def authenticate(token: str) -> Subject:
        return Subject(token)

    served = create_app(retriever, authenticate, max_vector_length=DIM)

    @contextlib.asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        yield
        shard.close()

    served.router.lifespan_context = lifespan
    return served


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(app(args.data_dir), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
