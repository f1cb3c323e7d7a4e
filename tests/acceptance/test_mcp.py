"""The MCP server, through the real MCP client (the SDK's ClientSession), over both
transports: streamable HTTP on a sidecar that takes verified tokens only, and stdio
(`whose mcp`, a process of its own with its own store).

The launch-date story end to end: Alice remembers in a private session; Alice recalls
and reads her own statement, attributed, with its source; Bob recalls the same and gets
an abstention with the date nowhere in the result; the flattened write (Alice's words
stored as Bob's claim) is refused with its reasons. And: no token, no tool; another
tenant sees nothing; a forbidden memory answers exactly like a missing one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import jwt
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent

from tests.acceptance.proxy_world import AUDIENCE, ISSUER, JWT_ENV, SECRET, token
from tests.conftest import REPO
from tests.factories import served as served_sidecar

DATE_WORDS = ("October 17", "2026-10-17")
LAUNCH = {"text": "the launch is October 17", "key": "launch.date", "value": "2026-10-17"}
# What Alice said in her private session, as an extractor would pass it on.
ALICE_SAID = {
    "speaker": "alice",
    "source_id": "private-session-42",
    "channel": "dm",
    "claims": [{"proposition": LAUNCH, "hedged": True, "confidence": 0.78}],
}
# The flattening: Alice's words stored as Bob's own claim.
FLATTENED = {
    "speaker": "bob",
    "source_id": "private-session-42",
    "participants": ["alice"],
    "claims": [{"proposition": LAUNCH}],
}
QUESTION = {"query": "when is the launch?"}


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def everything(result: CallToolResult) -> str:
    """All a host (and the model behind it) receives of a result."""
    return text_of(result) + json.dumps(result.structured_content)


# --- streamable HTTP ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # Not --dev: only verified tokens reach the tools.
    with served_sidecar(tmp_path_factory.mktemp("mcp-http"), JWT_ENV, dev=False) as base:
        yield base


@asynccontextmanager
async def http_session(base: str, bearer: str | None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(f"{base}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def call(base: str, who: str, tool: str, arguments: dict[str, Any], **claims: Any) -> Any:
    async with http_session(base, token(who, **claims)) as session:
        return await session.call_tool(tool, arguments)


async def test_the_launch_date_story_over_http(served: str) -> None:
    remembered = await call(served, "alice", "remember", ALICE_SAID)
    assert not remembered.is_error, text_of(remembered)
    [record] = remembered.structured_content["records"]
    assert (record["observer_id"], record["audience"]) == ("alice", ["alice"])

    alice = await call(served, "alice", "recall", QUESTION)
    assert not alice.is_error, text_of(alice)
    said = text_of(alice)
    assert said.startswith("attributed: only beliefs")
    assert "alice said that the launch is October 17" in said
    assert "source private-session-42, confidence 0.78" in said
    assert "obligations: attribute it to alice; cite private-session-42" in said
    # The writer's own wording is never what the model reads.
    assert record["content"] not in said
    assert alice.structured_content["verdict"] == "attributed"
    [item] = alice.structured_content["items"]
    assert item["id"] == record["id"]

    bob = await call(served, "bob", "recall", QUESTION)
    assert not bob.is_error, text_of(bob)
    assert text_of(bob) == "abstain: nothing you may be told: verify or abstain."
    assert bob.structured_content["verdict"] == "abstain"
    assert bob.structured_content["items"] == []
    for word in (*DATE_WORDS, record["id"], "private-session-42", "alice"):
        assert word not in everything(bob), word

    # Alice, answering in front of Bob, is held to what Bob may hear.
    overheard = await call(served, "alice", "recall", {**QUESTION, "audience": ["bob"]})
    assert overheard.structured_content["verdict"] == "abstain"

    flattened = await call(served, "alice", "remember", FLATTENED)
    assert flattened.is_error
    assert flattened.structured_content["error"] == "write_refused"
    [problem] = flattened.structured_content["reasons"]
    assert "writer_not_holder" in problem["reasons"]
    assert text_of(flattened).startswith("write_refused: the write was refused")
    assert "writer_not_holder" in text_of(flattened)
    # Nothing of it was stored: Bob still has nothing to be told.
    assert (await call(served, "bob", "recall", QUESTION)).structured_content["items"] == []

    # Each call is audited under its tool's route, with what it decided.
    auditor = {"Authorization": f"Bearer {token('erin', roles=['auditor'])}"}
    async with httpx.AsyncClient(base_url=served, headers=auditor) as http:
        about = await http.get("/v1/audit", params={"record": record["id"]})
        alices = await http.get("/v1/audit", params={"asker": "alice", "outcome": "refused"})
    routes = {(e["asker"], e["route"]) for e in about.json()["entries"]}
    assert {("alice", "mcp.remember"), ("alice", "mcp.recall")} <= routes
    refused = alices.json()["entries"]
    assert [e["route"] for e in refused] == ["mcp.remember"]
    assert "writer_not_holder" in refused[0]["written"][0]["reasons"]


async def test_the_other_tools_are_gated_the_same_way(served: str) -> None:
    key = f"launch.date.{uuid.uuid4().hex[:8]}"
    said = {**ALICE_SAID, "claims": [{"proposition": {**LAUNCH, "key": key}}]}
    said = {**said, "participants": ["carol"]}
    # Carol was there: the extractor attests it, not Alice's own agent (issue 35).
    first = await call(served, "extractor-bot", "remember", said)
    [record] = first.structured_content["records"]
    moved = {**LAUNCH, "key": key, "text": "the launch is October 24", "value": "2026-10-24"}
    second = await call(
        served, "extractor-bot", "remember", {**said, "claims": [{"proposition": moved}]}
    )
    [newer] = second.structured_content["records"]

    got = await call(served, "carol", "get_memory", {"id": record["id"]})
    assert not got.is_error, text_of(got)
    assert text_of(got).startswith("1. alice said that the launch is October 17")
    assert "superseded: no longer held" in text_of(got)

    versions = await call(served, "carol", "history", {"id": newer["id"]})
    assert [i["id"] for i in versions.structured_content["items"]] == [record["id"], newer["id"]]
    assert "alice said that the launch is October 24" in text_of(versions)

    views = await call(served, "carol", "what_do_people_think", {"key": key})
    assert [i["id"] for i in views.structured_content["perspectives"]] == [newer["id"]]
    assert "What people think about" in text_of(views)

    # Bob was not there: each tool answers him exactly as for a memory that never was.
    missing = str(uuid.uuid4())
    for tool, arguments in (
        ("get_memory", {"id": record["id"]}),
        ("history", {"id": newer["id"]}),
    ):
        forbidden = await call(served, "bob", tool, arguments)
        absent = await call(served, "bob", tool, {"id": missing})
        assert forbidden.is_error
        assert absent.is_error
        assert (
            forbidden.structured_content
            == absent.structured_content
            == {
                "error": "not_found",
                "reasons": [],
            }
        )
        assert text_of(forbidden) == text_of(absent)
    nobody = await call(served, "bob", "what_do_people_think", {"key": key})
    assert nobody.structured_content["perspectives"] == []
    assert nobody.structured_content["verdict"] == "abstain"


async def test_another_tenant_sees_nothing(served: str) -> None:
    remembered = await call(served, "alice", "remember", ALICE_SAID)
    [record] = remembered.structured_content["records"]
    # The same name in another tenant is somebody else.
    recalled = await call(served, "alice", "recall", QUESTION, tenant="globex")
    assert recalled.structured_content["verdict"] == "abstain"
    for word in DATE_WORDS:
        assert word not in everything(recalled)
    got = await call(served, "alice", "get_memory", {"id": record["id"]}, tenant="globex")
    assert got.structured_content == {"error": "not_found", "reasons": []}


async def test_bad_arguments_are_refused_with_reasons(served: str) -> None:
    refused = await call(served, "alice", "recall", {"query": "", "about": ""})
    assert refused.is_error
    assert refused.structured_content["error"] == "invalid_request"
    assert {r["loc"][0] for r in refused.structured_content["reasons"]} == {"query", "about"}
    assert text_of(refused).startswith("invalid_request: ")
    # A bound only the sidecar knows (WHOSE_MAX_LIMIT), refused as the API refuses it,
    # with one reason however far out.
    for limit in (0, 500, 5000):
        too_many = await call(served, "alice", "recall", {"query": "launch", "limit": limit})
        assert too_many.structured_content == {
            "error": "invalid_request",
            "reasons": ["limit_within_1..100"],
        }
    not_an_id = await call(served, "alice", "get_memory", {"id": "not-a-uuid"})
    assert not_an_id.structured_content["error"] == "invalid_request"


async def test_tool_descriptions_teach_attribution(served: str) -> None:
    async with http_session(served, token("alice")) as session:
        listed = await session.list_tools()
    tools = {tool.name: tool for tool in listed.tools}
    assert set(tools) == {
        "remember",
        "recall",
        "get_memory",
        "history",
        "what_do_people_think",
        "forget",
        "grant_access",
        "revoke_access",
        "list_grants",
        "open_conversation",
        "change_membership",
        "never_keep",
        "lift_forget_rule",
    }
    for tool in tools.values():
        assert "attribut" in (tool.description or ""), tool.name
        assert tool.output_schema is not None, tool.name
    assert tools["recall"].input_schema["properties"]["query"]["maxLength"] == 4000
    assert tools["recall"].annotations is not None
    assert tools["recall"].annotations.read_only_hint is True
    assert tools["forget"].annotations is not None
    assert tools["forget"].annotations.destructive_hint is True


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({}, "missing_token"),
        ({"Authorization": "Bearer not-a-token"}, "invalid_token"),
        # Dev headers mean nothing to a sidecar that is not in dev mode.
        ({"X-Whose-Asker": "alice", "X-Whose-Tenant": "acme"}, "missing_token"),
    ],
)
def test_no_tool_without_a_verified_token(
    served: str, headers: dict[str, str], reason: str
) -> None:
    call: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    call["params"] = {"name": "recall", "arguments": QUESTION}
    accept = {"Accept": "application/json, text/event-stream"}
    answer = httpx.post(f"{served}/mcp", json=call, headers=headers | accept)
    assert answer.status_code == 401
    assert answer.json() == {"error": "unauthenticated", "reasons": [reason], "reason": reason}
    # RFC 9728: the challenge names the metadata, and the metadata names the issuer.
    challenge = answer.headers["www-authenticate"]
    metadata_url = f"{served}/.well-known/oauth-protected-resource/mcp"
    assert challenge == f'Bearer resource_metadata="{metadata_url}"'
    metadata = httpx.get(metadata_url).json()
    assert metadata["resource"] == f"{served}/mcp"
    assert metadata["authorization_servers"] == [ISSUER]
    assert httpx.get(f"{served}/.well-known/oauth-protected-resource").json() == metadata


def test_a_hostile_host_header_is_never_named_as_the_resource(served: str) -> None:
    """/mcp refuses a foreign Host (421); its challenge and the protected-resource
    metadata must not name it either, or a caller picks the resource a host trusts."""
    evil = {"Host": "evil.example", "Accept": "application/json, text/event-stream"}
    answer = httpx.post(f"{served}/mcp", json={"jsonrpc": "2.0", "id": 1}, headers=evil)
    assert answer.status_code == 401
    assert "evil.example" not in answer.headers["www-authenticate"]
    assert (
        f"{served}/.well-known/oauth-protected-resource/mcp" in (answer.headers["www-authenticate"])
    )
    for path in (
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ):
        metadata = httpx.get(f"{served}{path}", headers={"Host": "evil.example"}).json()
        assert metadata["resource"] == f"{served}/mcp"


async def test_the_real_client_is_refused_without_a_token(served: str) -> None:
    statuses: list[int] = []

    async def seen(response: httpx2.Response) -> None:
        statuses.append(response.status_code)

    with pytest.RaisesGroup(MCPError, flatten_subgroups=True):
        async with (
            httpx2.AsyncClient(event_hooks={"response": [seen]}, timeout=30) as http,
            streamable_http_client(f"{served}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
    assert statuses == [401]


def test_an_expired_token_is_refused(served: str) -> None:
    expired = token("alice", exp=int(time.time()) - 60)
    answer = httpx.post(
        f"{served}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Authorization": f"Bearer {expired}", "Accept": "application/json"},
    )
    assert (answer.status_code, answer.json()["reason"]) == (401, "token_expired")


# --- stdio: `whose mcp` -----------------------------------------------------------------


def whose_mcp(
    data_dir: Path, *args: str, env: dict[str, str] | None = None
) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "sidecar", "mcp", "--data-dir", str(data_dir), *args],
        env={"WHOSE_LOG_LEVEL": "WARNING", **(env or {})},
        cwd=REPO,
    )


@asynccontextmanager
async def stdio_session(server: StdioServerParameters) -> AsyncIterator[ClientSession]:
    # The server's stderr (its logs) next to its data, for when a test fails.
    data_dir = Path(server.args[server.args.index("--data-dir") + 1])
    with (data_dir / "stderr.log").open("a") as errors:
        async with (
            stdio_client(server, errlog=errors) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


def as_token(who: str) -> dict[str, str]:
    return JWT_ENV | {"WHOSE_TOKEN": token(who)}


async def test_the_launch_date_story_over_stdio(tmp_path: Path) -> None:
    async with stdio_session(whose_mcp(tmp_path, env=as_token("alice"))) as alice:
        remembered = await alice.call_tool("remember", ALICE_SAID)
        assert not remembered.is_error, text_of(remembered)
        said = text_of(await alice.call_tool("recall", QUESTION))
        flattened = await alice.call_tool("remember", FLATTENED)
    assert said.startswith("attributed: only beliefs")
    assert "alice said that the launch is October 17" in said
    assert "source private-session-42, confidence 0.78" in said
    assert "cite private-session-42" in said
    assert flattened.is_error
    assert "writer_not_holder" in flattened.structured_content["reasons"][0]["reasons"]

    async with stdio_session(whose_mcp(tmp_path, env=as_token("bob"))) as bob:
        recalled = await bob.call_tool("recall", QUESTION)
    assert text_of(recalled) == "abstain: nothing you may be told: verify or abstain."
    for word in DATE_WORDS:
        assert word not in everything(recalled)

    # Another tenant's alice, in the same store, is somebody else.
    other = JWT_ENV | {"WHOSE_TOKEN": token("alice", tenant="globex")}
    async with stdio_session(whose_mcp(tmp_path, env=other)) as stranger:
        elsewhere = await stranger.call_tool("recall", QUESTION)
    assert elsewhere.structured_content["verdict"] == "abstain"


async def test_stdio_dev_identity(tmp_path: Path) -> None:
    dev = whose_mcp(tmp_path, "--dev", "--asker", "alice", "--tenant", "acme")
    async with stdio_session(dev) as alice:
        await alice.call_tool("remember", ALICE_SAID)
        said = text_of(await alice.call_tool("recall", QUESTION))
    assert "alice said that the launch is October 17" in said


def run_whose_mcp(
    data_dir: Path, *args: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("WHOSE_")} | env
    command = [sys.executable, "-m", "sidecar", "mcp", "--data-dir", str(data_dir), *args]
    return subprocess.run(
        command,
        env=environment,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize(
    ("env", "args", "says"),
    [
        ({}, (), "no identity provider"),
        (JWT_ENV, (), "no identity: set WHOSE_TOKEN"),
        (
            JWT_ENV | {"WHOSE_TOKEN": "not-a-token"},
            (),
            "WHOSE_TOKEN is not accepted: invalid_token",
        ),
        (
            JWT_ENV
            | {
                "WHOSE_TOKEN": jwt.encode(
                    {"sub": "alice", "tenant": "acme", "iss": ISSUER, "aud": AUDIENCE, "exp": 1},
                    SECRET,
                )
            },
            (),
            "WHOSE_TOKEN is not accepted: token_expired",
        ),
        ({}, ("--dev",), "--dev needs --asker"),
        ({}, ("--dev", "--asker", "group:launch-team"), "invalid dev identity"),
    ],
)
def test_stdio_refuses_to_start_without_an_identity(
    tmp_path: Path, env: dict[str, str], args: tuple[str, ...], says: str
) -> None:
    result = run_whose_mcp(tmp_path, *args, env=env)
    assert result.returncode == 2, result.stderr
    assert says in result.stderr
    assert result.stdout == ""
