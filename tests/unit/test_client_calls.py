"""The Python client's routes and rules, without a server (sidecar/client/).

Every native route the server declares has a call, with the same method and path; the
sync and async clients offer the same methods; a write is sent again only when it never
left; a refusal reads back as the error tree's class; the LangGraph store's mapping of
namespaces and keys is one-to-one.
"""

from __future__ import annotations

import inspect
import re
import typing
import uuid
from typing import Any

import httpx
import pytest
from fastapi.routing import APIRoute
from hypothesis import given
from hypothesis import strategies as st
from langgraph.store.base import InvalidNamespaceError, MatchCondition, PutOp
from pydantic import BaseModel
from starlette.routing import BaseRoute

import sidecar.client.calls as calls
from sidecar.client import AsyncWhoseClient, DevIdentity, WhoseClient, may_retry
from sidecar.client.langgraph import (
    Options,
    claim,
    matches,
    meets,
    memory_key,
    parse_key,
    record_of,
)
from sidecar.errors import (
    InvalidRequest,
    LockUnavailable,
    NotFound,
    PolicyUnavailable,
    StoreUnavailable,
    WriteRefused,
)
from sidecar.http import admin, api, erasures, grants
from sidecar.messages import ErasureRequest, RecallRequest


def served(routes: list[BaseRoute]) -> set[tuple[str, str]]:
    found = set()
    for route in routes:
        path = getattr(route, "path", "")
        for method in getattr(route, "methods", set()) - {"HEAD"}:
            # `{name:key}`: the convertor is the server's business; the client sends a key.
            found.add((method, re.sub(r"\{(\w+):key\}", r"{\1}", path)))
    return found


def test_every_native_route_has_a_call() -> None:
    server = (
        served(api.router.routes)
        | served(admin.router.routes)
        | served(erasures.router.routes)
        | served(grants.router.routes)
    )
    client = {(r.method, r.template) for r in calls.ROUTES if r.template.startswith("/v1/")}
    assert server, "the server's routes were not read"
    assert server - client == set(), "routes the client cannot call"
    assert client - server == set(), "calls to routes the server does not have"


def public(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in vars(cls).items()
        if inspect.isfunction(member) and not name.startswith("_")
    }


def test_the_async_client_mirrors_the_sync_one() -> None:
    sync, aio = public(WhoseClient), public(AsyncWhoseClient)
    routes = set(sync) - {"send", "close"}
    assert routes <= set(aio)
    for name in routes:
        assert inspect.iscoroutinefunction(vars(AsyncWhoseClient)[name]), name
        assert list(sync[name].parameters) == list(aio[name].parameters), name
        assert sync[name].return_annotation == aio[name].return_annotation, name


def test_each_route_method_answers_with_a_server_model() -> None:
    for name in set(public(WhoseClient)) - {"send", "close", "scroll"}:
        answer = typing.get_type_hints(vars(WhoseClient)[name])["return"]
        assert isinstance(answer, type), name
        assert issubclass(answer, BaseModel), name
        assert answer.__module__ == "sidecar.messages", name


READ = calls.recall(RecallRequest(query="when is the launch?"))
WRITE = calls.remember([])
REQUEST = httpx.Request("POST", "http://127.0.0.1/")


@pytest.mark.parametrize(
    ("error", "read", "write"),
    [
        # Never left: neither was applied.
        (httpx.ConnectError("refused", request=REQUEST), True, True),
        (httpx.ConnectTimeout("slow", request=REQUEST), True, True),
        # Answered 503: nothing was decided, but a write is still not sent twice.
        (PolicyUnavailable(), True, False),
        (StoreUnavailable(), True, False),
        (LockUnavailable(), True, False),
        # Sent, then lost: it may have been applied.
        (httpx.ReadTimeout("slow", request=REQUEST), False, False),
        (httpx.RemoteProtocolError("dropped", request=REQUEST), False, False),
        (httpx.ReadError("reset", request=REQUEST), False, False),
        # Refused for good: asking again changes nothing.
        (WriteRefused([]), False, False),
        (InvalidRequest(), False, False),
        (NotFound(), False, False),
    ],
)
def test_what_is_sent_again(error: BaseException, read: bool, write: bool) -> None:
    assert may_retry(READ, error) is read
    assert may_retry(WRITE, error) is write


def test_writes_and_reads_are_told_apart() -> None:
    record_id = uuid.uuid4()
    writes: list[calls.Call[Any]] = [
        calls.remember([]),
        calls.delete(record_id),
        calls.request_erasure(ErasureRequest(kind="tenant")),
    ]
    reads: list[calls.Call[Any]] = [
        calls.get(record_id),
        calls.history(record_id),
        calls.views("k"),
        calls.audit(),
        calls.erasure_status(record_id),
    ]
    assert not any(call.read for call in writes)
    assert all(call.read for call in reads)


@pytest.mark.parametrize("key", ["..", "a/../../v1/audit", "launch?date#x", "line\nbreak", "ü"])
def test_a_key_stays_one_path_segment(key: str) -> None:
    prefix = "/v1/propositions/"
    # As httpx sends it, after its own normalisation of the URL.
    sent = httpx.URL(f"http://127.0.0.1{calls.views(key).path}").raw_path.decode()
    assert sent.startswith(prefix)
    segment = sent.removeprefix(prefix)
    for character in ("/", "?", "#", ".."):
        assert character not in segment
    # What the server decodes is the key itself.
    assert httpx.URL(f"http://127.0.0.1{sent}").path.removeprefix(prefix) == key


def test_refusals_read_back_by_code() -> None:
    problems = b'{"error":"write_refused","reasons":[{"index":0,"reasons":["writer_not_holder"]}]}'
    refused = calls.refusal(problems)
    assert isinstance(refused, WriteRefused)
    assert refused.problems == [{"index": 0, "reasons": ["writer_not_holder"]}]
    decision = uuid.uuid4()
    # Recall failing closed: the refusal, an abstention too, names its decision.
    abstained = calls.refusal(
        f'{{"error":"policy_unavailable","reasons":[],"verdict":"abstain","items":[],'
        f'"reason":"policy_unavailable","decision_id":"{decision}"}}'.encode()
    )
    assert isinstance(abstained, PolicyUnavailable)
    assert abstained.decision_id == decision
    assert calls.refusal(b"<html>bad gateway</html>") is None
    assert calls.refusal(b'{"error":"a_code_of_a_newer_server"}') is None


def test_dev_identity_headers() -> None:
    dev = DevIdentity("erin", "acme", groups=["launch-team"], roles=["auditor", "policy-admin"])
    assert dev.headers() == {
        "X-Whose-Asker": "erin",
        "X-Whose-Tenant": "acme",
        "X-Whose-Groups": "launch-team",
        "X-Whose-Roles": "auditor,policy-admin",
    }
    with pytest.raises(ValueError, match="exactly one"):
        WhoseClient("http://127.0.0.1:1", token="t", dev=dev)


def optional_without_default(model: type[BaseModel], seen: set[type[BaseModel]]) -> list[str]:
    if model in seen:
        return []
    seen.add(model)
    found = []
    for name, field in model.model_fields.items():
        args = typing.get_args(field.annotation)
        if field.is_required() and type(None) in args:
            found.append(f"{model.__name__}.{name}")
        for arg in [field.annotation, *args, *(a for x in args for a in typing.get_args(x))]:
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                found += optional_without_default(arg, seen)
    return found


def test_answers_served_without_nulls_read_back_into_their_models() -> None:
    # The native routes drop null fields (response_model_exclude_none): an optional
    # field without a default would make the server's own answer unreadable by its model.
    answers = {
        route.response_model
        for route in api.router.routes
        if isinstance(route, APIRoute) and route.response_model_exclude_none
    }
    assert answers
    missing: list[str] = []
    seen: set[type[BaseModel]] = set()
    for model in answers:
        missing += optional_without_default(model, seen)
    assert not missing


# --- the LangGraph store's mapping -------------------------------------------------

label = st.text(min_size=1, max_size=12).filter(lambda s: "." not in s and "\x00" not in s)


@given(holder=label, path=st.lists(label, max_size=3), key=st.text(max_size=12))
def test_a_key_names_one_item(holder: str, path: list[str], key: str) -> None:
    assert parse_key(memory_key(holder, path, key)) == (holder, tuple(path), key)


def put(namespace: tuple[str, ...], value: dict[str, Any], index: Any = None) -> PutOp:
    return PutOp(namespace, "launch", value, index=index)


def test_a_put_is_the_holders_record() -> None:
    value = {"text": "the launch is October 17", "whose": {"attribution": "read back"}}
    record = record_of(put(("acme", "alice", "memories"), value), "acme", Options(fields=("text",)))
    assert record.observer_id == "alice"
    assert record.audience == ["alice"]
    assert record.proposition is not None
    assert record.proposition.text == "the launch is October 17"
    assert record.proposition.key == "alice/memories/launch"
    # The annotation read back is not stored again.
    assert "whose" not in record.content
    assert "read back" not in record.content


@pytest.mark.parametrize(
    "namespace", [("acme",), ("globex", "alice"), ("langgraph", "alice")], ids=str
)
def test_a_namespace_outside_the_tenant_is_refused(namespace: tuple[str, ...]) -> None:
    with pytest.raises(InvalidNamespaceError):
        record_of(put(namespace, {"text": "x"}), "acme", Options())


def test_the_claim_is_the_text_at_the_fields() -> None:
    value = {"text": "alice likes pizza", "meta": {"n": 2}}
    assert claim(value, ["text"]) == "alice likes pizza"
    assert claim(value, ["meta.n"]) == "2"
    # Nothing at the fields: the whole value, as LangGraph's `$`.
    assert claim(value, ["missing"]) == claim(value, ["$"])
    assert '"alice likes pizza"' in claim(value, ["$"])


def test_filters_as_langgraph_reads_them() -> None:
    value = {"kind": "pref", "n": 2, "meta": {"lang": "en"}, "tags": ["a", "b"]}
    assert matches(value, {"kind": "pref", "meta": {"lang": "en"}})
    assert matches(value, {"n": {"$gt": 1, "$lte": 2}, "kind": {"$ne": "fact"}})
    assert matches(value, {"tags": ["a", "b"]})
    assert not matches(value, {"kind": "fact"})
    assert not matches(value, {"missing": {"$gt": 0}})
    with pytest.raises(ValueError, match="unsupported"):
        matches(value, {"n": {"$regex": "."}})


def test_namespace_conditions_with_wildcards() -> None:
    namespace = ("acme", "alice", "memories")
    assert meets(MatchCondition("prefix", ("acme", "*")), namespace)
    assert meets(MatchCondition("suffix", ("*", "memories")), namespace)
    assert not meets(MatchCondition("prefix", ("acme", "bob")), namespace)
    assert not meets(MatchCondition("suffix", ("prefs",)), namespace)


def test_a_chain_of_minds_is_sent_as_repeated_observed() -> None:
    call = calls.views("k", depth=3, observer="anne", observed=["sally", "anne"])
    assert call.params == [
        ("depth", "3"),
        ("observer", "anne"),
        ("observed", "sally"),
        ("observed", "anne"),
    ]
    assert calls.views("k", observed="sally").params == [("observed", "sally")]
