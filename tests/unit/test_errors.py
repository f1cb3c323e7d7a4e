"""The error tree: every refusal the core raises is a WhoseError with a code of its
own, served as a problem that reads back as its class (errors.py). How each transport
maps every class: tests/unit/test_refusals.py."""

from __future__ import annotations

import importlib
import pkgutil
import uuid
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

import sidecar
from sidecar.errors import (
    FilterRefused,
    NotFound,
    PolicyUnavailable,
    Unauthenticated,
    WhoseError,
    WriteRefused,
    refusal_class,
    validation_reasons,
)
from sidecar.messages import MemoryWrites, RecallRequest


def every_error() -> list[type[WhoseError]]:
    for module in pkgutil.walk_packages(sidecar.__path__, "sidecar."):
        if not module.name.startswith("sidecar.bench") and not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    found: list[type[WhoseError]] = []
    todo: list[type[WhoseError]] = [WhoseError]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(current.__subclasses__())
    return found


def test_each_refusal_has_its_own_code() -> None:
    errors = every_error()
    names = {error.__name__ for error in errors}
    # The core's refusals are in the tree, not beside it.
    assert {"StoreUnavailable", "PolicyUnavailable", "LockUnavailable", "WriteRefused"} <= names
    codes = [error.code for error in errors]
    assert len(codes) == len(set(codes)), codes


def test_every_refusal_is_a_problem() -> None:
    # One shape: a code and its reasons, whatever else a class adds.
    for cls in every_error():
        body = sample(cls).body()
        assert body["error"] == cls.code
        assert isinstance(body["reasons"], list)


def test_not_found_says_nothing_but_its_code() -> None:
    assert NotFound("memory", ["anything"]).body() == {"error": "not_found", "reasons": []}


def test_every_refusal_lives_in_errors_py() -> None:
    # One tree in one module: the Python client reads refusals back by code from
    # errors.py alone (sidecar/client/calls.py), and imports nothing else of the server.
    elsewhere = [e.__qualname__ for e in every_error() if e.__module__ != "sidecar.errors"]
    assert not elsewhere, f"define these in sidecar/errors.py: {elsewhere}"


def sample(cls: type[WhoseError]) -> WhoseError:
    if cls is WriteRefused:
        return WriteRefused([{"index": 0, "id": "x", "reasons": ["writer_not_holder"]}])
    if cls is FilterRefused:
        return FilterRefused("unindexed_key", "`x` has no index to filter on")
    if cls is Unauthenticated:
        return Unauthenticated("token_expired")
    return cls("message", ["a_reason"])


@pytest.mark.parametrize("cls", every_error(), ids=lambda cls: cls.__name__)
def test_a_served_refusal_reads_back_as_its_class(cls: type[WhoseError]) -> None:
    served = sample(cls).body()
    found = refusal_class(served["error"])
    assert found is cls
    back = found.from_body(served)
    assert type(back) is cls
    assert back.body() == served


def test_a_write_refusal_reads_back_with_every_reason() -> None:
    problems = [{"index": 0, "id": "x", "reasons": ["known_without_evidence", "writer_not_holder"]}]
    back = WriteRefused.from_body(WriteRefused(problems).body())
    assert isinstance(back, WriteRefused)
    assert back.problems == problems
    assert "known_without_evidence" in str(back)


def test_failing_closed_is_an_abstention_that_names_its_decision() -> None:
    refused = PolicyUnavailable("OPA answered 500")
    refused.decision_id = uuid.uuid4()
    body = refused.body()
    assert (body["verdict"], body["items"], body["reason"]) == ("abstain", [], "policy_unavailable")
    assert "OPA" not in str(body)
    back = PolicyUnavailable.from_body(body)
    assert isinstance(back, PolicyUnavailable)
    assert back.decision_id == refused.decision_id


def test_an_unknown_code_names_no_class() -> None:
    assert refusal_class("no_such_code") is None
    assert refusal_class(None) is None


def reasons_for(model: Any, sent: Any) -> list[list[Any]]:
    try:
        TypeAdapter(model).validate_python(sent)
    except ValidationError as exc:
        return [r["loc"] for r in validation_reasons(exc.errors(), sent)]
    raise AssertionError("validated")


def test_a_reason_says_where_in_what_was_sent() -> None:
    record = {"content": "x", "observer_id": "a", "source_id": "s", "modality": "gossip"}
    # pydantic names the union branches it tried; what was sent has no such keys.
    assert reasons_for(MemoryWrites, record) == [["modality"]]
    assert reasons_for(MemoryWrites, [record, record]) == [[0, "modality"], [1, "modality"]]
    assert reasons_for(RecallRequest, {"query": "x", "observed": 5}) == [["observed"]] * 2
    assert reasons_for(RecallRequest, {"query": "x", "observed": ["a", 7]}) == [
        ["observed"],
        ["observed", 1],
    ]
    # A field that was not sent is named all the same.
    missing = {k: v for k, v in record.items() if k != "source_id"} | {"modality": "asserted"}
    assert reasons_for(MemoryWrites, missing) == [["source_id"]]


def test_only_the_document_s_reasons_are_walked() -> None:
    errors: list[dict[str, Any]] = [
        {"loc": ("query", "as_of"), "type": "datetime_from_date_parsing", "msg": "bad"},
        {"loc": ("body", "one", "limit"), "type": "int_type", "msg": "bad"},
        {"loc": ("body", 3), "type": "json_invalid", "msg": "JSON decode error"},
    ]
    sent = {"limit": "x"}
    assert [r["loc"] for r in validation_reasons(errors, sent, within="body")] == [
        ["query", "as_of"],
        ["body", "limit"],
        ["body", 3],
    ]
