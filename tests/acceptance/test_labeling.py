"""The labeling policy through a running sidecar: an application that keeps its own ACLs
writes LangChain documents through the Qdrant dialect unchanged (docs/policies.md,
"Labels from a document's own metadata").

A security team maps the application's keys in data.whose.config.labeling (`acl` to
the audience, `owner` to the holder, `path` to the source): Bob, on the ACL, reads
Alice's document as hers; Carol, not on it, reads nothing of it. Under the shipped
policy (no mapping) the same point is refused, naming the label it lacks.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator

import httpx
import pytest
from langchain_qdrant import QdrantVectorStore
from qdrant_client.http import models as qm
from qdrant_client.http.exceptions import UnexpectedResponse

from tests.acceptance.proxy_world import COLLECTION, JWT_ENV, embed
from tests.acceptance.test_langchain import SidecarEmbeddings, client_for
from tests.conftest import POLICY_DIR, as_
from tests.factories import served

pytestmark = pytest.mark.filterwarnings(
    "ignore:Api key is used with an insecure connection:UserWarning"
)

LABELING = {
    "audience_keys": ["acl"],
    "holder_keys": ["owner"],
    "source_keys": ["path"],
    # Everything under /eng/ is work: what a grant of "work" discloses (docs/consent.md).
    "rules": [{"key": "path", "prefix": "/eng/", "categories": ["work"]}],
}
METADATA = {"acl": ["bob"], "owner": "alice", "path": "/eng/x.md"}
TEXT = "the eng offsite moves to Porto"


@pytest.fixture(scope="module")
def mapped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A sidecar whose policy maps the application's ACL keys."""
    folder = tmp_path_factory.mktemp("labeling")
    policy = folder / "rego"
    shutil.copytree(POLICY_DIR, policy)
    config = policy / "whose" / "config" / "data.json"
    config.write_text(json.dumps(json.loads(config.read_text()) | {"labeling": LABELING}))
    with served(folder / "data", JWT_ENV | {"WHOSE_POLICY_DIR": str(policy)}) as base:
        yield base


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with served(tmp_path_factory.mktemp("shipped"), JWT_ENV) as base:
        yield base


def store_for(base: str, who: str) -> QdrantVectorStore:
    return QdrantVectorStore(
        client=client_for(base, who), collection_name=COLLECTION, embedding=SidecarEmbeddings()
    )


def found(base: str, who: str) -> list[str]:
    return [
        d.page_content
        for d in store_for(base, who).similarity_search("the eng offsite", k=10)
        if "Porto" in d.page_content
    ]


def test_an_acl_names_the_readers_and_the_owner_whose_it_is(mapped: str) -> None:
    # Written as LangChain writes it, with the application's own metadata.
    [written] = store_for(mapped, "alice").add_texts([TEXT], metadatas=[METADATA])
    [seen] = found(mapped, "bob")
    assert seen.startswith("alice says that")
    assert TEXT in seen
    assert found(mapped, "carol") == []
    # The metadata comes back as the application wrote it.
    [doc] = [
        d
        for d in store_for(mapped, "bob").similarity_search(TEXT, k=10)
        if "Porto" in d.page_content
    ]
    assert (doc.metadata["acl"], doc.metadata["path"]) == (["bob"], "/eng/x.md")
    assert written


def test_the_owner_must_be_the_writer(mapped: str) -> None:
    # Labels name whose it is; the write policy still decides who may write it.
    with pytest.raises(UnexpectedResponse) as refused:
        store_for(mapped, "carol").add_texts(["carol writes as alice"], metadatas=[METADATA])
    assert refused.value.status_code == 422
    assert b"writer_not_holder" in refused.value.content


def test_a_document_without_an_acl_is_refused_naming_the_label(mapped: str) -> None:
    with pytest.raises(UnexpectedResponse) as refused:
        store_for(mapped, "alice").add_texts(
            ["no acl"], metadatas=[{"owner": "alice", "path": "/x"}]
        )
    assert refused.value.status_code == 422
    assert b"missing_metadata:audience" in refused.value.content


def test_without_the_mapping_the_same_point_is_refused(shipped: str) -> None:
    point = qm.PointStruct(
        id="5f0c7a8e-2b1d-4e6f-9a3c-7d8e9f0a1b2c",
        vector=embed(TEXT),
        payload={"page_content": TEXT, "metadata": METADATA},
    )
    with pytest.raises(UnexpectedResponse) as refused:
        client_for(shipped, "alice").upsert(COLLECTION, points=[point])
    assert refused.value.status_code == 422
    assert b"missing_metadata:audience" in refused.value.content
    assert b"missing_metadata:source" in refused.value.content
    assert client_for(shipped, "alice").retrieve(COLLECTION, ids=[point.id]) == []


def test_a_folder_rule_gives_categories_a_grant_discloses_by(mapped: str) -> None:
    text = "the eng budget is frozen until March"
    metadata = METADATA | {"path": "/eng/budget.md"}
    store_for(mapped, "alice").add_texts([text], metadatas=[metadata])

    def budget(who: str) -> list[str]:
        found = store_for(mapped, who).similarity_search("the eng budget", k=10)
        return [d.page_content for d in found if "budget is frozen" in d.page_content]

    assert budget("carol") == []
    grant = {"reader": "carol", "categories": ["work"]}
    given = httpx.post(f"{mapped}/v1/grants", json=grant, headers=as_("alice"), timeout=30)
    assert given.status_code == 201, given.text
    [seen] = budget("carol")
    assert seen.startswith("alice says that")
