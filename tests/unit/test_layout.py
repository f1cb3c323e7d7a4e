"""A stack collection's vectors (store/layout.py): what a Qdrant create-collection
request asks, what whose refuses by name, and what GET /collections/{name} answers."""

from __future__ import annotations

from typing import Any

import pytest
from qdrant_client.http import models as qm

from sidecar.errors import CollectionRefused, InvalidRequest, QueryRefused
from sidecar.store.layout import DenseSpace, VectorLayout
from sidecar.store.stacks import check_name, physical_name

# LangChain's hybrid collection as `QdrantVectorStore.from_texts` creates it with
# OpenAI's embedding size and its default names.
LANGCHAIN = {
    "vectors": {"": {"size": 1536, "distance": "Cosine"}},
    "sparse_vectors": {"langchain-sparse": {"modifier": "idf"}},
}


def test_whose_layout_is_todays_collection() -> None:
    layout = VectorLayout.whose(384)
    assert layout.dense == {"": DenseSpace(384, qm.Distance.COSINE)}
    assert set(layout.sparse) == {"lexical"}
    assert layout.computes_lexical
    assert layout.embeds
    assert layout.given() == {""}


def test_a_langchain_hybrid_collection_is_kept_as_sent() -> None:
    layout = VectorLayout.from_create_body(LANGCHAIN)
    assert layout.dense == {"": DenseSpace(1536, qm.Distance.COSINE)}
    assert layout.sparse == {"langchain-sparse": qm.Modifier.IDF}
    assert not layout.computes_lexical
    assert not layout.embeds
    # Recorded with its modifier; kept (and searched) without it.
    assert layout.sparse_config(as_sent=True)["langchain-sparse"].modifier == qm.Modifier.IDF
    assert layout.sparse_config(as_sent=False)["langchain-sparse"].modifier is None
    assert VectorLayout.from_json(layout.as_json()) == layout


@pytest.mark.parametrize(
    "vectors",
    [
        {"size": 1536, "distance": "Cosine"},
        {"": {"size": 1536, "distance": "Cosine"}},
    ],
    ids=["unnamed", "named-empty"],
)
def test_the_info_answers_the_vectors_as_sent(vectors: dict[str, Any]) -> None:
    layout = VectorLayout.from_create_body(LANGCHAIN | {"vectors": vectors})
    served = layout.as_info().model_dump(mode="json", exclude_none=True)
    # What qdrant-client's get_collection parses, and what LangChain's check of an
    # existing collection reads of it: the vectors in the form sent (a dict, or one
    # VectorParams), their size and distance, and the sparse vector's name.
    info = qm.CollectionInfo.model_validate(served)
    assert info.points_count is None
    sent = qm.CreateCollection.model_validate(LANGCHAIN | {"vectors": vectors})
    assert info.config.params.vectors == sent.vectors
    assert info.config.params.sparse_vectors == sent.sparse_vectors


def test_named_vectors_of_any_size_and_distance() -> None:
    layout = VectorLayout.from_create_body(
        {
            "vectors": {
                "text": {"size": 65536, "distance": "Dot"},
                "image": {"size": 1, "distance": "Manhattan"},
            },
            "sparse_vectors": {"bm25": {}},
        }
    )
    assert layout.dense["text"] == DenseSpace(65536, qm.Distance.DOT)
    assert layout.dense["image"] == DenseSpace(1, qm.Distance.MANHATTAN)
    assert layout.sparse == {"bm25": None}
    assert not layout.single


def test_harmless_tuning_is_accepted_and_left_to_whose() -> None:
    body = {
        "vectors": {
            "size": 8,
            "distance": "Euclid",
            "hnsw_config": {"m": 32},
            "on_disk": True,
            "quantization_config": {"scalar": {"type": "int8"}},
        },
        "shard_number": 12,
        "replication_factor": 3,
        "write_consistency_factor": 2,
        "on_disk_payload": False,
        "hnsw_config": {"ef_construct": 256},
        "optimizers_config": {"indexing_threshold": 0},
        "wal_config": {"wal_capacity_mb": 64},
        "quantization_config": {"binary": {}},
        "strict_mode_config": {"enabled": True},
        "metadata": {"team": "search"},
    }
    layout = VectorLayout.from_create_body(body)
    assert layout == VectorLayout({"": DenseSpace(8, qm.Distance.EUCLID)}, {}, False, True)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            {
                "vectors": {
                    "size": 8,
                    "distance": "Cosine",
                    "multivector_config": {"comparator": "max_sim"},
                }
            },
            "multivector_config",
        ),
        ({"vectors": {"size": 8, "distance": "Cosine", "datatype": "uint8"}}, "datatype"),
        ({"sparse_vectors": {"s": {"index": {"datatype": "float16"}}}}, "datatype"),
        (
            {"vectors": {"size": 8, "distance": "Cosine"}, "sharding_method": "custom"},
            "sharding_method",
        ),
        (
            {"vectors": {"size": 8, "distance": "Cosine"}, "init_from": {"collection": "x"}},
            "init_from",
        ),
        ({"vectors": {"size": 65537, "distance": "Cosine"}}, "vector_size"),
        ({"vectors": {"size": 0, "distance": "Cosine"}}, "vector_size"),
        ({"vectors": {}}, "no_vectors"),
        (
            {"vectors": {"a": {"size": 4, "distance": "Dot"}}, "sparse_vectors": {"a": {}}},
            "vector_name_twice",
        ),
    ],
)
def test_what_whose_cannot_honour_is_refused_by_name(body: dict[str, Any], reason: str) -> None:
    with pytest.raises(CollectionRefused) as refused:
        VectorLayout.from_create_body(body)
    assert refused.value.reason == reason
    assert refused.value.body()["reasons"] == [reason]
    assert str(refused.value)


def test_a_body_that_is_not_a_create_request_is_invalid() -> None:
    with pytest.raises(InvalidRequest):
        VectorLayout.from_create_body({"vectors": {"size": "big", "distance": "Cosine"}})


def test_vectors_a_writer_sent_are_checked_against_the_layout() -> None:
    layout = VectorLayout.from_create_body(LANGCHAIN)
    sparse = qm.SparseVector(indices=[1, 7], values=[0.5, 0.25])
    assert layout.problems({"": [1.0] * 1536, "langchain-sparse": sparse}) == []
    assert layout.problems({"other": [1.0]}) == ["vector_name_unknown:other"]
    assert layout.problems({"": [1.0] * 3}) == ["vector_dimension_must_be_1536"]
    assert layout.problems({"": [0.0] * 1536}) == ["vector_length_unusable:"]
    assert layout.problems({"": sparse}) == ["vector_must_be_dense:"]
    assert layout.problems({"langchain-sparse": [1.0]}) == [
        "vector_must_be_sparse:langchain-sparse"
    ]
    mismatched = qm.SparseVector(indices=[1, 2, 3], values=[0.5])
    assert layout.problems({"langchain-sparse": mismatched}) == [
        "sparse_vector_invalid:langchain-sparse"
    ]
    twice = qm.SparseVector(indices=[1, 1], values=[0.5, 0.5])
    assert layout.problems({"langchain-sparse": twice}) == [
        "sparse_vector_invalid:langchain-sparse"
    ]
    named = VectorLayout.from_create_body({"vectors": {"t": {"size": 2, "distance": "Dot"}}})
    assert named.problems({"t": [1.0]}) == ["vector_dimension_must_be_2:t"]
    # The whose collection: its lexical vector is the store's to compute.
    assert VectorLayout.whose(4).problems({"lexical": sparse}) == [
        "vector_set_by_the_sidecar:lexical"
    ]


def test_a_vector_name_the_collection_lacks_is_refused_in_qdrants_words() -> None:
    layout = VectorLayout.from_create_body(LANGCHAIN)
    layout.require({"", "langchain-sparse"})
    with pytest.raises(QueryRefused, match="Not existing vector name error: dense"):
        layout.require({"dense"})


@pytest.mark.parametrize("name", ["", "a/b", "x" * 256, "nul\0", "a:b", "a?b", 'q"'])
def test_qdrants_collection_name_rule(name: str) -> None:
    with pytest.raises(CollectionRefused) as refused:
        check_name(name)
    assert refused.value.reason == "collection_name"


def test_the_physical_name_is_per_tenant_and_says_neither_name() -> None:
    ours, theirs = physical_name("acme", "kb"), physical_name("globex", "kb")
    assert ours != theirs
    assert ours.startswith("whose_stack_")
    for physical in (ours, theirs):
        assert "acme" not in physical
        assert "globex" not in physical
        assert "kb" not in physical
        check_name(physical)
    # One tenant's collections share a prefix (listed without reading another's).
    assert physical_name("acme", "docs")[:29] == ours[:29]
