"""Request bodies parsed by pydantic-core's parser (sidecar/http/bodies.py) read as the
standard library reads them: the same value, or the same error, for any bytes; every
route that takes a JSON body parses it that way; and the recall's DirectRoute answers
any request exactly as FastAPI's own handling does."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Annotated, Any

import pytest
from fastapi import APIRouter, Depends, FastAPI, Path
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse, Response

from sidecar.auth.identity import dev_identity
from sidecar.auth.tokens import Authenticator
from sidecar.errors import Unauthenticated
from sidecar.http import refusals
from sidecar.http.app import create_app
from sidecar.http.bodies import DirectRoute, JsonRoute, parsed
from sidecar.http.deps import Asker, Svc, asker
from sidecar.http.limits import BodySizeLimit
from sidecar.http.qdrant.dialect import QDRANT, QdrantError, error_response
from sidecar.http.qdrant.routes import RawBody
from sidecar.messages import RecallRequest
from sidecar.settings import Settings

values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


def outcome(read: Any, body: bytes) -> str:
    # repr tells 1 from 1.0 and -0.0 from 0.0, and writes NaN the same each time.
    try:
        return "value " + repr(read(body))
    except (ValueError, RecursionError) as exc:
        return f"{type(exc).__name__} {exc}"


@settings(max_examples=400, deadline=None)
@given(values, st.sampled_from(["utf-8", "utf-16", "utf-32"]), st.booleans())
def test_a_json_text_reads_as_the_standard_library_reads_it(
    value: Any, encoding: str, ascii_only: bool
) -> None:
    body = json.dumps(value, ensure_ascii=ascii_only).encode(encoding, errors="surrogatepass")
    assert outcome(parsed, body) == outcome(json.loads, body)


@settings(max_examples=400, deadline=None)
@given(values, st.binary(max_size=8), st.integers(min_value=0))
def test_any_bytes_read_or_fail_as_the_standard_library_reads_them(
    value: Any, noise: bytes, at: int
) -> None:
    text = json.dumps(value).encode()
    at %= len(text) + 1
    body = text[:at] + noise + text[at:]
    assert outcome(parsed, body) == outcome(json.loads, body)


def test_edge_cases_the_two_parsers_split_on_read_as_the_standard_library_reads_them() -> None:
    for body in [
        b'{"query": "\\ud800"}',  # a lone surrogate escape
        b"\xef\xbb\xbf{}",  # a byte-order mark
        b"[" * 300 + b"]" * 300,  # deeper than pydantic-core's parser goes
        b"[" * 20_000 + b"]" * 20_000,  # deeper than the standard library's
        b'{"vector": [NaN, Infinity, -Infinity]}',
        b'{"query": "\xff"}',
    ]:
        assert outcome(parsed, body) == outcome(json.loads, body), body[:40]


def _routes(routes: list[Any]) -> Iterator[Any]:
    for route in routes:
        if hasattr(route, "original_router"):  # an included router (FastAPI keeps them nested)
            yield from _routes(route.original_router.routes)
        else:
            yield route


def test_every_route_that_takes_a_json_body_parses_it_with_pydantic_core() -> None:
    app = create_app(Settings(dev=True))
    routes = [r for r in _routes(app.routes) if isinstance(r, APIRoute)]
    bodied = [r for r in routes if r.body_field is not None]
    assert len(bodied) > 20
    # A console form is not JSON.
    slow = sorted(r.path for r in bodied if not isinstance(r, JsonRoute))
    assert [p for p in slow if not p.startswith("/console")] == []


# --- DirectRoute: the same answer as FastAPI's own way, for any request -------------

_seen_by_fastapi: list[bool] = []


async def _echo(request: RecallRequest, svc: Svc, who: Asker) -> Response:
    """What the endpoint was called with, as its answer; and whether FastAPI's own
    request handling called it."""
    _seen_by_fastapi.append(
        any(frame.function == "run_endpoint_function" for frame in inspect.stack())
    )
    called = {"asked": request.model_dump(mode="json"), "who": who.policy_view()}
    return Response(json.dumps(called, sort_keys=True), media_type="application/json")


async def _echo_read(collection: str, body: RawBody, svc: Svc, who: Asker) -> JSONResponse:
    """The same for a route shaped as the Qdrant dialect's reads."""
    _seen_by_fastapi.append(
        any(frame.function == "run_endpoint_function" for frame in inspect.stack())
    )
    return JSONResponse({"collection": collection, "asked": body, "who": who.policy_view()})


def _echo_app(route_class: type[APIRoute], **included: Any) -> FastAPI:
    """An app wired as create_app wires it (a router included, the body limit, the
    refusal mapping of both dialects, a real Authenticator in dev mode), with a recall
    route and a route shaped as the Qdrant dialect's reads, both of `route_class`."""
    settings = Settings(dev=True, max_body_bytes=4096)
    router = APIRouter(route_class=JsonRoute)
    router.add_api_route("/v1/recall", _echo, methods=["POST"], route_class_override=route_class)
    router.add_api_route(
        "/collections/{collection}/points/query",
        _echo_read,
        methods=["POST"],
        route_class_override=route_class,
    )
    app = FastAPI()
    app.include_router(router, **included)
    answers = refusals.Refusals(
        by_prefix={"/collections": QDRANT}, own={QdrantError: error_response}
    )
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes, respond=answers.respond)
    refusals.install(app, answers)
    app.state.services = SimpleNamespace(authenticate=Authenticator(settings))
    return app


_DIRECT, _FASTAPI = _echo_app(DirectRoute), _echo_app(JsonRoute)

recall_bodies = st.fixed_dictionaries(
    {},
    optional={
        "query": st.text(max_size=20),
        "vector": st.lists(st.floats(width=32), min_size=1, max_size=4),
        "limit": st.integers(min_value=-2, max_value=300),
        "about": st.text(max_size=10),
        "include_history": st.booleans(),
        "audience": st.lists(st.text(max_size=6), max_size=3),
        "path": st.lists(st.sampled_from(["bob", "carol", "", "group:x"]), max_size=3),
        "nonsense": values,
    },
)
bodies = (
    recall_bodies.map(lambda b: json.dumps(b).encode())
    | values.map(lambda v: json.dumps(v).encode())
    | st.binary(max_size=40)
    | st.just(b"")
    | st.just(b'{"query": "' + b"x" * 5000 + b'"}')  # over the body limit
)
content_types = st.sampled_from(
    [
        None,
        "application/json",
        "application/json; charset=utf-8",
        "text/plain",
        "application/ld+json",
        "APPLICATION/JSON",
    ]
)
identities = st.sampled_from(
    [
        {},
        {"x-whose-asker": "bob", "x-whose-tenant": "acme"},
        {"x-whose-asker": "group:x", "x-whose-tenant": "acme"},
        {"x-whose-asker": "bob", "x-whose-tenant": "acme", "authorization": "Bearer x"},
    ]
)


def _answer(
    app: FastAPI,
    body: bytes,
    content_type: str | None,
    who: dict[str, str],
    chunked: bool,
    path: str = "/v1/recall",
) -> tuple[int, str, str | None]:
    headers = dict(who) | ({"content-type": content_type} if content_type else {})
    with TestClient(app, raise_server_exceptions=False) as client:
        sent = iter([body[:10], body[10:]]) if chunked else body
        answer = client.post(path, content=sent, headers=headers)
    return answer.status_code, answer.text, answer.headers.get("content-type")


@settings(max_examples=300, deadline=None)
@given(
    bodies,
    content_types,
    identities,
    st.booleans(),
    st.sampled_from(
        ["/v1/recall", "/collections/docs/points/query", "/collections/a%20b/points/query"]
    ),
)
def test_a_direct_route_answers_any_request_as_fastapi_does(
    body: bytes, content_type: str | None, who: dict[str, str], chunked: bool, path: str
) -> None:
    assert _answer(_DIRECT, body, content_type, who, chunked, path) == _answer(
        _FASTAPI, body, content_type, who, chunked, path
    )


def test_a_well_formed_recall_skips_fastapis_request_handling_and_nothing_else_does() -> None:
    who = {"x-whose-asker": "bob", "x-whose-tenant": "acme"}
    _seen_by_fastapi.clear()
    assert _answer(_DIRECT, b'{"query": "q"}', "application/json", who, False)[0] == 200
    # Another spelling of JSON's media type, and a body the model refuses: FastAPI's way.
    assert (
        _answer(_DIRECT, b'{"query": "q"}', "application/json; charset=utf-8", who, False)[0] == 200
    )
    assert _answer(_DIRECT, b'{"limit": "q"}', "application/json", who, False)[0] == 422
    assert _answer(_FASTAPI, b'{"query": "q"}', "application/json", who, False)[0] == 200
    read = "/collections/docs/points/query"
    assert _answer(_DIRECT, b'{"limit": 3}', "application/json", who, False, read)[0] == 200
    assert _answer(_DIRECT, b"[1]", "application/json", who, False, read)[0] == 400  # Qdrant's
    assert _seen_by_fastapi == [False, True, True, False]


def test_a_direct_route_refuses_an_endpoint_it_cannot_call_directly() -> None:
    async def numbered(n: int, request: RecallRequest, svc: Svc, who: Asker) -> Response:
        return Response()

    async def short(
        c: Annotated[str, Path(max_length=1)], request: RecallRequest, svc: Svc, who: Asker
    ) -> Response:
        return Response()

    async def aliased(
        c: Annotated[str, Path(alias="x")], request: RecallRequest, svc: Svc, who: Asker
    ) -> Response:
        return Response()

    async def queried(request: RecallRequest, svc: Svc, who: Asker, page: int = 0) -> Response:
        return Response()

    async def connected(
        request: RecallRequest, svc: Svc, who: Asker, connection: HTTPConnection
    ) -> Response:
        return Response()

    async def anonymous(request: RecallRequest, svc: Svc) -> Response:
        return Response()

    def waiting(request: RecallRequest, svc: Svc, who: Asker) -> Response:
        return Response()

    refused: list[tuple[str, Callable[..., Any]]] = [
        ("/x/{n}", numbered),
        ("/x/{c}", short),
        ("/x/{x}", aliased),
        ("/x", queried),
        ("/x", connected),
        ("/x", anonymous),
        ("/x", waiting),
    ]
    for path, endpoint in refused:
        with pytest.raises(TypeError, match="a DirectRoute endpoint is async and takes"):
            DirectRoute(path, endpoint, methods=["POST"])


def test_a_direct_route_keeps_what_the_including_router_and_the_app_add() -> None:
    """A dependency the including router adds, or an override of `asker`, is FastAPI's
    to apply: the direct path never answers in their place."""
    who = {"x-whose-asker": "bob", "x-whose-tenant": "acme"}

    async def closed() -> None:
        raise Unauthenticated("closed")

    guarded = _echo_app(DirectRoute, dependencies=[Depends(closed)])
    assert _answer(guarded, b'{"query": "q"}', "application/json", who, False)[0] != 200
    overridden = _echo_app(DirectRoute)
    fastapi_way = _echo_app(JsonRoute)
    for app in (overridden, fastapi_way):
        app.dependency_overrides[asker] = lambda: dev_identity("someone", "elsewhere")
    assert _answer(overridden, b'{"query": "q"}', "application/json", {}, False) == _answer(
        fastapi_way, b'{"query": "q"}', "application/json", {}, False
    )


def _too_deep_from(app: FastAPI, who: dict[str, str]) -> tuple[int, tuple[int, str, str | None]]:
    """The least nesting of a JSON array that the app refuses as too deep, and how."""

    def answer(depth: int) -> tuple[int, str, str | None]:
        return _answer(app, b"[" * depth + b"]" * depth, "application/json", who, False)

    # Within the app's body limit (4096 bytes): 2 000 levels are 4 000 bytes.
    shallow, deep = 2, 2_000
    assert "nested too deep" in answer(deep)[1]
    while deep - shallow > 1:
        middle = (shallow + deep) // 2
        if "nested too deep" in answer(middle)[1]:
            deep = middle
        else:
            shallow = middle
    return deep, answer(deep)


def test_a_body_that_exhausts_the_stack_does_so_at_the_depth_it_does_for_fastapi() -> None:
    # The standard library's parser (after pydantic-core's refuses) recurses once a
    # level: one more frame on the way in would refuse one level sooner, and refuse an
    # anonymous caller's body where FastAPI asks who is calling first.
    for who in ({}, {"x-whose-asker": "bob", "x-whose-tenant": "acme"}):
        assert _too_deep_from(_DIRECT, who) == _too_deep_from(_FASTAPI, who)
