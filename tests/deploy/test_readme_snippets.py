"""The README's integration snippets, run as written against a sidecar like `make serve`'s.

Each snippet is the fenced block after a `<!-- snippet: NAME -->` line. The Python
ones (LlamaIndex, Haystack, the whose client, LangGraph) run with the names the README
says to bring (`user_token`, `embed_model`, `query_embedding`, a LangGraph `builder`);
the MCP host configs are read as a host reads them and connected to with the real MCP
client. The only substitutions:
the sidecar's port, the checkout's path, a data folder, and the token.
"""

from __future__ import annotations

import os

# Before Haystack is imported: tests send nothing off the machine.
os.environ["HAYSTACK_TELEMETRY_ENABLED"] = "False"

import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypedDict

import httpx
import httpx2
import jwt
import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent

from sidecar.client import DevIdentity
from sidecar.client.langgraph import WhoseStore
from sidecar.embed.hashing import HashingEmbedder
from tests.acceptance.test_llamaindex import SidecarEmbedding
from tests.conftest import REPO, as_, start_sidecar, stop

pytestmark = pytest.mark.filterwarnings(
    "ignore:Api key is used with an insecure connection:UserWarning"
)

README = (REPO / "README.md").read_text()
SECRET = "readme-snippets-hs256-secret-32-bytes!!"
SERVED = "http://127.0.0.1:8080"
embed = HashingEmbedder(384).embed
ATTRIBUTED = "alice believes that the launch is October 17 — source private-session-42"


def snippet(name: str) -> str:
    found = re.search(rf"<!-- snippet: {name} -->\n```\w+\n(.*?)```", README, re.S)
    assert found, f"README has no snippet {name!r}"
    return found.group(1)


def user_token(who: str) -> str:
    # As the README mints it for `make serve`.
    claims = {"sub": who, "tenant": "acme", "exp": int(time.time()) + 3600}
    return jwt.encode(claims, SECRET)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`make serve` with a key, as the README's "Drop-in for Qdrant" sets it up, and
    the README's story: Alice's belief from her private session."""
    base, process = start_sidecar(
        tmp_path_factory.mktemp("readme"), env={"WHOSE_JWT_HS256_SECRET": SECRET}
    )
    # The README's first record: Alice's belief, stored by hand (not a statement: an
    # observation would be worded "alice said that …").
    belief = {
        "content": "Alice believes the launch is October 17",
        "proposition": {
            "text": "the launch is October 17",
            "key": "launch.date",
            "value": "2026-10-17",
        },
        "observer_id": "alice",
        "source_id": "private-session-42",
        "source": {"kind": "conversation", "speaker": "alice"},
        "modality": "reported_belief",
        "confidence": 0.78,
        "audience": ["alice"],
    }
    stored = httpx.post(f"{base}/v1/memories", json=belief, headers=as_("alice"))
    assert stored.status_code == 201, stored.text
    yield base
    stop(process)


def run(code: str, base: str, **names: Any) -> dict[str, Any]:
    assert SERVED in code
    scope = dict(names)
    exec(code.replace(SERVED, base), scope)
    return scope


@pytest.mark.parametrize(("who", "sees"), [("alice", True), ("bob", False)])
def test_llamaindex_snippet(served: str, who: str, sees: bool) -> None:
    scope = run(
        snippet("llamaindex"), served, user_token=user_token(who), embed_model=SidecarEmbedding()
    )
    texts = [n.node.get_content() for n in scope["nodes"]]
    assert any(t.startswith(ATTRIBUTED) for t in texts) is sees, texts
    assert not any("October 17" in t for t in texts) or sees


@pytest.mark.parametrize(("who", "sees"), [("alice", True), ("bob", False)])
def test_haystack_snippet(served: str, who: str, sees: bool) -> None:
    scope = run(
        snippet("haystack"),
        served,
        user_token=user_token(who),
        query_embedding=embed("when is the launch?"),
    )
    contents = [d.content for d in scope["documents"]]
    assert any(c.startswith(ATTRIBUTED) for c in contents) is sees, contents
    assert not any("October 17" in c for c in contents) or sees


def test_python_client_snippet(served: str) -> None:
    scope = run(snippet("python-client"), served)
    told, refused = scope["told"], scope["refused"]
    assert told.verdict == "attributed"
    assert told.items[0].attribution.startswith(ATTRIBUTED)
    assert refused.verdict == "abstain"
    assert refused.items == []
    scope["alice"].close()
    scope["bob"].close()


class Turn(TypedDict, total=False):
    recalled: list[str]


def recall(state: Turn, *, store: BaseStore) -> Turn:
    found = store.search(("acme", "alice", "memories"), query="when is the launch?")
    return {"recalled": [item.value["whose"]["attribution"] for item in found]}


def test_langgraph_snippet(served: str) -> None:
    builder = StateGraph(Turn)
    builder.add_node("recall", recall)
    builder.add_edge(START, "recall")
    builder.add_edge("recall", END)
    scope = run(snippet("langgraph"), served, builder=builder)
    told = "alice believes that the launch is October 17 — source langgraph"
    assert scope["memories"][0].value["whose"]["attribution"].startswith(told)
    recalled = scope["graph"].invoke({})["recalled"]
    assert recalled[0].startswith(told)
    # The same store asking as Bob: nothing of Alice's memory.
    bob = WhoseStore(served, dev=DevIdentity("bob", "acme"))
    assert bob.search(("acme", "alice", "memories"), query="when is the launch?") == []
    assert bob.get(("acme", "alice", "memories"), "launch") is None
    bob.close()
    scope["store"].close()


def text(result: Any) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


async def test_mcp_http_config(served: str) -> None:
    config = json.loads(snippet("mcp-http"))["mcpServers"]["whose"]
    assert config["type"] == "http"
    url = config["url"].replace(SERVED, served)
    headers = {
        k: v.replace("<user_token>", user_token("alice")) for k, v in config["headers"].items()
    }
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        recalled = await session.call_tool("recall", {"query": "when is the launch?"})
    assert ATTRIBUTED in text(recalled)


async def test_mcp_stdio_config(tmp_path: Path) -> None:
    raw = snippet("mcp-stdio")
    raw = raw.replace("/path/to/whose/mcp-data", str(tmp_path)).replace("/path/to/whose", str(REPO))
    config = json.loads(raw)["mcpServers"]["whose"]
    server = StdioServerParameters(
        command=config["command"], args=config["args"], env=config.get("env")
    )
    with (tmp_path / "stderr.log").open("w") as errors:
        async with (
            stdio_client(server, errlog=errors) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            remembered = await session.call_tool(
                "remember",
                {
                    "speaker": "alice",
                    "source_id": "private-session-42",
                    "claims": [
                        {
                            "proposition": {"text": "the launch is October 17"},
                            "hedged": True,
                            "confidence": 0.78,
                        }
                    ],
                },
            )
            assert not remembered.is_error, text(remembered)
            recalled = await session.call_tool("recall", {"query": "when is the launch?"})
    # What she said through `remember` is her statement (README, "Agents: MCP").
    assert "alice said that the launch is October 17 — source private-session-42" in text(recalled)


def test_langchain_snippet_writes_retrieves_and_deletes(served: str) -> None:
    from tests.acceptance.test_langchain import SidecarEmbeddings

    scope = run(
        snippet("langchain"), served, user_token=user_token("alice"), embeddings=SidecarEmbeddings()
    )
    found = [d.page_content for d in scope["docs"] if "offsite" in d.page_content]
    assert found
    assert found[0].startswith("alice says that “the offsite is in Lisbon”")
    assert scope["store"].get_by_ids(scope["ids"]) == []  # deleted


def test_llamaindex_ingest_snippet(served: str) -> None:
    scope = run(
        snippet("llamaindex-ingest"),
        served,
        user_token=user_token("alice"),
        embed_model=SidecarEmbedding(),
    )
    found = [n.node.get_content() for n in scope["nodes"] if "offsite" in n.node.get_content()]
    assert found
    assert found[0].startswith("alice says that “the offsite is in Lisbon”")
    left = scope["index"].as_retriever(similarity_top_k=5).retrieve("where is the offsite?")
    assert not any("offsite" in n.node.get_content() for n in left)


def test_haystack_ingest_snippet(served: str) -> None:
    scope = run(
        snippet("haystack-ingest"),
        served,
        user_token=user_token("alice"),
        embedding=embed("the offsite is in Lisbon"),
        query_embedding=embed("where is the offsite?"),
    )
    found = [d for d in scope["documents"] if "offsite" in (d.content or "")]
    assert [d.id for d in found] == [scope["offsite"].id]
    assert scope["store"].get_documents_by_id([scope["offsite"].id]) == []


def test_erasure_request_snippet(tmp_path: Path) -> None:
    """The curl as written (its path, headers and body) to a sidecar of its own, where
    Alice said something: it erases what she said."""
    served, process = start_sidecar(tmp_path / "sidecar")
    try:
        _erase_as_the_snippet_says(served)
    finally:
        stop(process)


def _erase_as_the_snippet_says(served: str) -> None:
    said = {
        "speaker": "alice",
        "source_id": "private-session-42",
        "participants": ["alice"],
        "claims": [{"proposition": {"text": "the launch is October 17"}}],
    }
    stored = httpx.post(f"{served}/v1/observations", json=said, headers=as_("alice"))
    assert stored.status_code == 201, stored.text
    command = snippet("erasure-request").split("\n#", 1)[0]
    path = re.search(r"localhost:8080(\S+)", command)
    assert path
    headers = dict(h.split(": ", 1) for h in re.findall(r"-H '([^']+)'", command))
    body = re.search(r"-d '(.+?)'", command, re.S)
    assert body
    answer = httpx.post(f"{served}{path.group(1)}", content=body.group(1), headers=headers)
    assert answer.status_code == 202, answer.text
    progress = answer.json()
    assert (progress["kind"], progress["subject"], progress["status"]) == (
        "subject",
        "alice",
        "done",
    )
    assert progress["erased"] == 1  # what Alice said


def test_sally_anne_snippet(served: str) -> None:
    """The theory-of-mind story, run by bash and curl as written (its port aside): each
    answer it prints is what the README's comments say."""
    script = snippet("sally-anne").replace("localhost:8080", served.removeprefix("http://"))
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in re.split(r"(?<=\})(?=\{)", done.stdout) if line]
    witnessed, moved, stage, anne_on_sally, told, heard, sallys, third, minds = answers
    assert [r["observer_id"] for r in witnessed["records"]] == ["sally", "anne"]
    assert len(moved["records"]) == 1
    assert len(stage["records"]) == 2
    [item] = anne_on_sally["items"]
    assert item["attribution"].startswith(
        "anne saw that sally believes that the marble is in the basket"
    )
    assert (item["usable_as"], item["derived_from"]) == (
        "nested_belief",
        witnessed["records"][1]["id"],
    )
    assert told["records"][0]["act"] == "said"
    [item] = heard["items"]
    assert item["attribution"].startswith("sally heard anne say that the marble is in the box")
    assert (item["usable_as"], item["act"]) == ("heard", "heard")
    assert sallys["verdict"] == "conflict"
    assert [i["proposition"]["value"] for i in sallys["items"]] == ["basket"]
    [conflict] = sallys["conflicts"]
    assert {(v["holder"], v["value"], v["usable_as"]) for v in conflict["views"]} == {
        ("sally", "basket", "belief"),
        ("anne", "box", "statement"),
    }
    [item] = third["items"]
    assert item["attribution"].startswith(
        "anne believes that sally believes that anne believes that the marble is in the box"
    )
    assert item["observed_path"] == ["sally", "anne"]
    assert minds["verdict"] == "answer"
    assert minds["world_state"]["attribution"].startswith("The marble is in the box")
    by_holder = {m["holder"]: m for m in minds["minds"]}
    assert [v["value"] for v in by_holder["anne"]["views"]] == ["box"]
    [sally] = by_holder["anne"]["about"]
    assert (sally["observed"], [v["value"] for v in sally["views"]]) == ("sally", ["basket"])
    [back] = sally["about"]
    assert (back["observed"], [v["value"] for v in back["views"]]) == ("anne", ["basket"])
    assert [v["value"] for v in by_holder["sally"]["views"]] == ["basket"]
