"""Every class of the error tree is mapped by every transport, each in its one place
(as httpx holds its exception mapping to httpcore's classes): the native HTTP API
and the Qdrant dialect (http/refusals.py, http/qdrant/dialect.py), the MCP tools
(mcp/tools.py), and the Python client reading a refusal back (client/calls.py,
errors.py `from_body`). A class added to errors.py without a mapping in each fails
here, by name."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import grpc
import pytest
from mcp.types import TextContent

from sidecar.client import calls
from sidecar.errors import (
    NotFound,
    PolicyUnavailable,
    QueryMissing,
    Unauthenticated,
    Unavailable,
    WhoseError,
    WriteRefused,
)
from sidecar.grpc_api.refusals import GRPC_STATUS, Unserved, refusal
from sidecar.http.qdrant.dialect import QDRANT, QDRANT_STATUS, QdrantError
from sidecar.http.refusals import NATIVE, NATIVE_STATUS, Refusals, respond
from sidecar.mcp.tools import WORDS, tool_error
from tests.unit.test_errors import every_error, sample

TREE = every_error()
TABLES: dict[str, dict[type[WhoseError], Any]] = {
    "native HTTP (http/refusals.py NATIVE_STATUS)": dict(NATIVE_STATUS),
    "Qdrant dialect (http/qdrant/dialect.py QDRANT_STATUS)": dict(QDRANT_STATUS),
    "MCP tools (mcp/tools.py WORDS)": dict(WORDS),
    "gRPC (grpc_api/refusals.py GRPC_STATUS)": dict(GRPC_STATUS),
}


@pytest.mark.parametrize("transport", TABLES)
def test_every_class_is_mapped(transport: str) -> None:
    table = TABLES[transport]
    unmapped = sorted(cls.__name__ for cls in TREE if cls not in table)
    assert not unmapped, f"{transport} maps no answer for: {unmapped}"
    stray = sorted(cls.__name__ for cls in table if cls not in TREE)
    assert not stray, f"{transport} maps classes outside errors.py: {stray}"


@pytest.mark.parametrize("table", [NATIVE_STATUS, QDRANT_STATUS], ids=["native", "qdrant"])
def test_a_refusal_is_an_error_status(table: dict[type[WhoseError], int]) -> None:
    assert all(400 <= status <= 599 for cls, status in table.items() if cls is not WhoseError)
    # A dependency that failed is 503 wherever it is answered: clients retry on it.
    assert {table[cls] for cls in TREE if issubclass(cls, Unavailable)} == {503}


def served(dialect: Any, error: WhoseError) -> tuple[int, dict[str, Any], dict[str, str]]:
    response = respond(dialect, error)
    return response.status_code, json.loads(bytes(response.body)), dict(response.headers)


@pytest.mark.parametrize("cls", TREE, ids=lambda cls: cls.__name__)
def test_native_answers_the_problem_and_the_client_reads_it_back(cls: type[WhoseError]) -> None:
    error = sample(cls)
    status, body, _ = served(NATIVE, error)
    assert status == NATIVE_STATUS[cls]
    assert body == error.body()
    back = calls.refusal(json.dumps(body).encode())
    assert type(back) is cls
    assert back.body() == body


@pytest.mark.parametrize("cls", TREE, ids=lambda cls: cls.__name__)
def test_qdrant_answers_in_its_own_shape_with_the_code(cls: type[WhoseError]) -> None:
    error = sample(cls)
    status, body, _ = served(QDRANT, error)
    assert status == QDRANT_STATUS[cls]
    assert set(body) == {"status", "time", "error", "reasons"}
    assert isinstance(body["status"]["error"], str)
    assert body["status"]["error"]
    assert isinstance(body["time"], float)
    # Whose's client reads the dialect's refusals back too (its scroll).
    back = calls.refusal(json.dumps(body).encode())
    assert type(back) is cls


def test_qdrant_never_says_what_an_unavailable_dependency_said() -> None:
    _, body, _ = served(QDRANT, PolicyUnavailable("OPA at /run/opa.sock answered 500"))
    assert "opa" not in json.dumps(body).lower().replace("policy_unavailable", "")


@pytest.mark.parametrize("cls", TREE, ids=lambda cls: cls.__name__)
def test_mcp_answers_a_tool_error_with_the_problem(cls: type[WhoseError]) -> None:
    error = sample(cls)
    result = tool_error(error)
    assert result.is_error
    assert result.structured_content == error.body()
    [text] = result.content
    assert isinstance(text, TextContent)
    assert text.text.startswith(f"{cls.code}: ")


def test_a_401_says_how_to_authenticate() -> None:
    for dialect in (NATIVE, QDRANT):
        _, _, headers = served(dialect, Unauthenticated("missing_token"))
        assert headers["www-authenticate"] == "Bearer"


def test_the_dialect_is_chosen_by_the_path() -> None:
    refusals = Refusals(by_prefix={"/collections": QDRANT})
    assert refusals.dialect("/collections") is QDRANT
    assert refusals.dialect("/collections/whose_memories/points/query") is QDRANT
    assert refusals.dialect("/collectionsX") is NATIVE
    assert refusals.dialect("/v1/recall") is NATIVE
    assert refusals.dialect("/mcp") is NATIVE


def test_failing_closed_reads_back_as_the_abstention_it_is() -> None:
    error = PolicyUnavailable("OPA answered 500")
    error.decision_id = uuid.uuid4()
    _, body, _ = served(NATIVE, error)
    assert (body["verdict"], body["items"]) == ("abstain", [])
    back = calls.refusal(json.dumps(body).encode())
    assert isinstance(back, PolicyUnavailable)
    assert back.decision_id == error.decision_id


def test_the_errors_page_lists_every_code_with_its_statuses() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "errors.md").read_text()
    rows = {
        cells[0].strip("`"): (int(cells[1]), int(cells[2]))
        for line in page.splitlines()
        if line.startswith("| `")
        for cells in [[c.strip() for c in line.strip("|").split("|")]]
    }
    served = {cls.code: (NATIVE_STATUS[cls], QDRANT_STATUS[cls]) for cls in TREE}
    assert rows == served
    over_grpc = {
        cells[0].strip("`"): cells[3]
        for line in page.splitlines()
        if line.startswith("| `")
        for cells in [[c.strip() for c in line.strip("|").split("|")]]
    }
    assert over_grpc == {cls.code: GRPC_STATUS[cls].name for cls in TREE}


@pytest.mark.parametrize("cls", TREE, ids=lambda cls: cls.__name__)
def test_grpc_answers_a_status_with_the_code_leading_the_message(cls: type[WhoseError]) -> None:
    error = sample(cls)
    refused = refusal(error)
    assert refused.code == GRPC_STATUS[cls]
    assert refused.message.startswith(cls.code)
    assert ("whose-error", cls.code) in refused.metadata


def test_grpc_refusals_are_never_ok_and_a_dependency_is_unavailable() -> None:
    assert grpc.StatusCode.OK not in GRPC_STATUS.values()
    unavailable = {GRPC_STATUS[cls] for cls in TREE if issubclass(cls, Unavailable)}
    assert unavailable == {grpc.StatusCode.UNAVAILABLE}
    # Forbidden and missing answer alike over gRPC too.
    assert GRPC_STATUS[NotFound] == GRPC_STATUS[QueryMissing] == grpc.StatusCode.NOT_FOUND
    said = refusal(PolicyUnavailable("OPA at /run/opa.sock answered 500"))
    assert "/run/opa.sock" not in said.message


def test_grpc_answers_the_dialects_own_refusals_and_what_it_does_not_serve() -> None:
    missing = refusal(QdrantError(404, "Not found: Collection `kb` doesn't exist!"))
    assert missing.code == grpc.StatusCode.NOT_FOUND
    assert missing.message == "Not found: Collection `kb` doesn't exist!"
    assert refusal(QdrantError(400, "bad")).code == grpc.StatusCode.INVALID_ARGUMENT
    unserved = refusal(Unserved("Points.SearchMatrixPairs", "a distance matrix"))
    assert unserved.code == grpc.StatusCode.UNIMPLEMENTED
    assert "SearchMatrixPairs" in unserved.message
    # Anything else is internal, and says nothing of itself.
    internal = refusal(RuntimeError("secret internals"))
    assert internal.code == grpc.StatusCode.INTERNAL
    assert "secret" not in internal.message
    write = refusal(WriteRefused([{"index": 0, "reasons": ["missing_metadata:audience"]}]))
    assert "missing_metadata:audience" in write.message
