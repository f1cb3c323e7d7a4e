"""Two stores, one asker: run the same requests against both and compare what comes back.

Store A holds the shared world; store B holds the same world plus records the
asker may not see. Each store is a sidecar of its own on embedded defaults (its
own engine and data directory, its own local OPA loading the prepared policy
folder as a bundle, so bundle revisions turn the decision cache on), or, for
policy data that changes between examples (test_configs.py), on an OPA server of
the test's own (`start_stores(own_opa=True)`, `Stores.enter`). Both stores
answer the same requests at once, one thread each; every answer becomes an
`Observation` (request, status, body), and the change the requests made to every
counter of the public listener's /metrics becomes one more (or one per request,
WHOSE_NI_METRICS=each). Both lists are normalised alike and must be equal,
element by element.

Normalisation takes out only what must differ between two runs: `decision_id`,
`time` (Qdrant's request timing), `recorded_at`, OPA decision ids, and, in
/metrics, latency histograms (`*_seconds_*`), `process_*`/`python_*` and the
`_created` timestamps. It names ids: the shared world's records `base#i`,
hidden records `hidden#j` (whichever store answers), the missing id `missing`,
the asker's stored records `mine#k` in the order the write answers gave them
(`new-mine#k` when the two stores gave one different ids: generated), ids both
stores showed as themselves, and any other id (one store's scroll offset or
refused record's id) `new1`, `new2`, ... in order of first appearance within its
answer.

Two rules more, each forced by something no store can make deterministic:
- generated record ids: a list the sidecar orders by record id (scroll pages,
  propositions, the views of a conflict) is compared as a set when it holds a
  record whose id the sidecar generated, since two stores generate different
  random ids and so order (and page) such a list differently whatever else they
  hold;
- the sidecar's text embedding and BM25: records written as observations carry no
  vector of their own, and a lexical score is a sum of a record's own term weights
  (two claims of as many words score alike), so a text query can score two records
  exactly alike, and a recall may then order records with generated ids (or, at its
  limit, choose between them) either way: `tie_only` allows that and nothing more,
  and the pairs it allowed are counted.
Every other order is compared as it is, and nothing else is scrubbed: any other
difference is a finding.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent
from qdrant_client import QdrantClient
from qdrant_client import models as qm
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from tests.acceptance.proxy_world import JWT_ENV, token
from tests.conftest import POLICY_DIR, Backend, as_, start_opa, start_sidecar, stop
from tests.forks import Process
from tests.noninterference.world import (
    BUILDER,
    BUILDER_ROLES,
    COLLECTION,
    MISSING_ID,
    PEOPLE,
    RELAY,
    TIMES,
    Asker,
    Case,
    Op,
    PolicyData,
    Rec,
    Resolver,
    chosen_id,
    foreign,
    tenant_directory,
    tenant_name,
    vector,
)

POINTS = f"/collections/{COLLECTION}/points"
MAX_PAGES = 25  # scroll pages followed per request
# The change in /metrics counters: by the whole request sequence of an example (the
# default: half the requests of `each`; a shrunk counterexample has a request or two
# anyway), after each request (WHOSE_NI_METRICS=each), or not compared (`off`: for
# triage only, to see the differences in answers behind a difference in counters).
METRICS = os.environ.get("WHOSE_NI_METRICS", "end")
if METRICS not in ("end", "each", "off"):
    raise ValueError("WHOSE_NI_METRICS: end, each or off")
METRICS_EACH = METRICS == "each"
# Both stores run on embedded defaults; these only keep the comparison deterministic
# and the logs small. A decision-cache bucket of an hour: a bucket boundary falling
# between store A's and store B's handling of one request would change a cache
# counter on one side only.
STORE_ENV = {
    **JWT_ENV,
    "WHOSE_LOG_LEVEL": "WARNING",
    "WHOSE_CACHE_BUCKET_S": "3600",
}


# --- the policy folder and the tenants -----------------------------------------------


def prepare_policy(target: Path, tenants: int) -> Path:
    """A copy of rego/ whose directory holds tenants t00000..: the same principals each."""
    shutil.copytree(POLICY_DIR, target)
    path = target / "whose" / "directory" / "data.json"
    data = json.loads(path.read_text())
    entry = tenant_directory()
    data["tenants"] |= {tenant_name(n): entry for n in range(tenants)}
    path.write_text(json.dumps(data))
    return target


class TenantPool:
    """A fresh tenant for every example (the policy folder defines `size` of them)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.used = 0
        self._lock = threading.Lock()

    def take(self) -> str:
        with self._lock:
            if self.used >= self.size:
                raise RuntimeError(
                    f"all {self.size} tenants of the prepared directory are used: "
                    "raise WHOSE_NI_TENANTS"
                )
            self.used += 1
            return tenant_name(self.used - 1)


class Connection:
    """How the asker reaches one store, kept for a whole module: an httpx client for
    the native routes (dev identity headers) and raw REST, and an unmodified
    qdrant-client. The client is built with `api_key=` a bearer token, as a RAG
    stack would; a middleware (qdrant-client's own hook) keeps a copy of every raw
    answer and puts the current example's token in `api-key`."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.http = httpx.Client(base_url=base, timeout=60)
        self.bearer = token("nobody", "nowhere")
        self.qdrant = QdrantClient(
            url=base,
            api_key=self.bearer,
            timeout=60,
            check_compatibility=False,
            limits=httpx.Limits(max_keepalive_connections=2),
        )
        self.qdrant.http.client.add_middleware(self._capture)
        self.captured: httpx.Response | None = None

    def _capture(
        self, request: httpx.Request, call_next: Callable[[httpx.Request], httpx.Response]
    ) -> httpx.Response:
        request.headers["api-key"] = self.bearer
        response = call_next(request)
        response.read()
        self.captured = response
        return response

    def close(self) -> None:
        self.http.close()
        self.qdrant.close()


@dataclass
class Stores:
    a: Connection
    b: Connection
    pool: TenantPool
    pool_workers: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=2, thread_name_prefix="store")
    )
    # The OPA server of each store when the stores use OPAs of the test's own (policy
    # data can then be changed over OPA's data API), else empty: each sidecar's own OPA.
    opas: tuple[str, ...] = ()
    # The tenant of the example their directory holds (Stores.enter).
    entered: str | None = field(default=None, init=False)

    def both(self, run: Callable[[str, Connection], Any]) -> tuple[Any, Any]:
        """run("A", store_a) and run("B", store_b) at once."""
        fa = self.pool_workers.submit(run, "A", self.a)
        fb = self.pool_workers.submit(run, "B", self.b)
        return fa.result(), fb.result()

    def enter(self, tenant: str, data: PolicyData | None) -> None:
        """Ready both stores' policy for an example in `tenant` under `data`.

        With the test's OPAs: one write to each (JSON Patch over OPA's data API, in
        force when OPA answers it) puts `data` (else the shipped defaults) into
        data.whose.config and `tenant` into the directory, in place of the previous
        example's: a write costs OPA time in proportion to all its data, so the
        directory holds the tenant being asked about alone. Nothing decided under other
        data is reused: these OPAs load the policy as files, not as a bundle, so their
        answers name no bundle revision and the sidecars cache no decision
        (policy/decider.py: no revision, each record decided alone, uncached); and every
        example has a tenant of its own, which every cache key names besides."""
        if not self.opas:
            assert data is None, "policy data needs stores started with own_opa=True"
            return
        patch: list[dict[str, Any]] = [
            {"op": "replace", "path": f"/config/{path}", "value": value}
            for path, value in (data or PolicyData()).documents().items()
        ]
        patch.append({"op": "add", "path": f"/directory/tenants/{tenant}", "value": DIRECTORY})
        if self.entered is not None:
            patch.append({"op": "remove", "path": f"/directory/tenants/{self.entered}"})
        self.entered = tenant

        def write(opa: str) -> None:
            response = httpx.patch(f"{opa}/v1/data/whose", json=patch, timeout=60)
            assert response.status_code == 204, response.text

        list(self.pool_workers.map(write, self.opas))


DIRECTORY = tenant_directory()


def start_stores(
    folder: Path,
    policy: Path,
    pool: TenantPool,
    backend: Backend,
    settings: dict[str, str] | None = None,
    own_opa: bool = False,
) -> Iterator[Stores]:
    """Stores A and B: two sidecars on `backend` (each with a store of its own: an
    embedded engine or a Qdrant server), each with its own local OPA, and `settings`
    (WHOSE_* variables) beside the defaults. `own_opa`: each sidecar uses an OPA server
    the test starts instead (`opa run --server` loading `policy` as files,
    WHOSE_OPA_URL), whose data `Stores.enter` changes for each example (the directory
    included: `policy` then needs no tenants of its own).

    One after the other: two local OPAs loading a large directory at once on two
    busy cores can miss start_sidecar's readiness deadline."""
    env = STORE_ENV | {"WHOSE_POLICY_DIR": str(policy)} | (settings or {})
    started: list[Process] = []
    stores: Stores | None = None
    try:
        bases: list[str] = []
        opas: list[str] = []
        for name in ("a", "b"):
            own: dict[str, str] = {}
            if own_opa:
                opa, opa_process = start_opa(policy, folder / f"opa-{name}.log")
                started.append(opa_process)
                opas.append(opa)
                own = {"WHOSE_OPA_URL": opa}
            base, sidecar = start_sidecar(folder / f"store-{name}", env | own | backend.env())
            started.append(sidecar)
            bases.append(base)
        stores = Stores(Connection(bases[0]), Connection(bases[1]), pool, opas=tuple(opas))
        yield stores
    finally:
        if stores is not None:
            stores.pool_workers.shutdown()
            stores.a.close()
            stores.b.close()
        for started_process in reversed(started):
            stop(started_process)


# --- one store's view --------------------------------------------------------------


@dataclass
class Observation:
    """One answer as the asker sees it: the request, its status and body, and what
    it changed in the counters of /metrics (or the status /metrics answered)."""

    request: str
    status: int
    body: Any
    metrics: Any = None
    # "by_id": a list the sidecar orders by record id (scroll pages, propositions),
    # compared as a set when it holds ids the sidecar generated (see `canonical`);
    # "ranked": a recall, whose results of exactly equal score have no order (see
    # `tie_only`).
    order: str = "as_sent"
    requests: int = 1  # HTTP requests it stands for (a scroll: its pages)
    limit: int | None = None  # a recall's limit

    def key(self) -> tuple[Any, ...]:
        return (self.request, self.status, self.body, self.metrics)


_SKIPPED_METRICS = ("process_", "python_")


def counters(text: str) -> dict[str, float]:
    """Samples of a Prometheus text page, without latency histograms, process and
    runtime families, and `_created` timestamps."""
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_labels, _, value = line.rpartition(" ")
        name = name_labels.split("{", 1)[0]
        if name.startswith(_SKIPPED_METRICS) or "_seconds_" in name or name.endswith("_created"):
            continue
        samples[name_labels] = float(value)
    return samples


class Side:
    """One store as the asker reaches it: native routes with dev identity headers,
    the Qdrant dialect through an unmodified qdrant-client with a bearer token (its
    raw answers captured by a middleware), raw REST for what the client lacks, and
    the MCP tools through the MCP SDK's client with the same token."""

    def __init__(self, name: str, store: Connection, tenant: str, asker: Asker) -> None:
        self.name = name
        self.store = store
        self.tenant = tenant
        self.asker = asker
        self.ids = Resolver()
        self.http = store.http
        self.qdrant = store.qdrant
        self.headers = as_(asker.id, tenant, groups=",".join(asker.groups))
        self.bearer = token(asker.id, tenant, groups=list(asker.groups))
        self.api_key = {"api-key": self.bearer}
        self._metrics: dict[str, float] = {}
        self.observations: list[Observation] = []
        self.stored: dict[str, dict[str, Any]] = {}  # the builder's stored records, by id
        # The grants the asker gave in this example, in order (for `revoke` requests).
        self.given: list[str] = []
        # When the world's grants drawn to end do (one instant for both stores).
        self.grants_end: datetime | None = None

    # --- building the world (as the builder: not observed) ---

    def build(self, case: Case, with_hidden: bool) -> list[tuple[str, int, int]]:
        """Write the world (after the subjects' grants); returns (kind, index, status)
        per write."""
        statuses: list[tuple[str, int, int]] = []
        for grant in case.grants:
            body: dict[str, Any] = {"reader": grant.reader, "categories": list(grant.categories)}
            if grant.purpose is not None:
                body["purpose"] = grant.purpose
            if grant.ends and self.grants_end is not None:
                body["until"] = self.grants_end.isoformat()
            response = self.http.post(
                "/v1/grants", json=body, headers=as_(grant.subject, self.tenant)
            )
            # A grant to its own subject is refused (reader_is_subject), alike in both.
            assert response.status_code in (201, 403), response.text
            statuses.append(("grant", len(statuses), response.status_code))
        for kind, index, record in case.steps(with_hidden):
            tenant = foreign(self.tenant) if record.foreign else self.tenant
            writer = as_(BUILDER, tenant, roles=BUILDER_ROLES)
            response = self.http.post("/v1/memories", json=record.body(self.ids), headers=writer)
            assert response.status_code in (201, 422), response.text
            statuses.append((kind, index, response.status_code))
            stored_id = record.literal_id()
            if response.status_code == 201:
                [stored] = response.json()["records"]
                stored_id = stored["id"]
                self.stored[stored_id] = stored
            (self.ids.base if kind == "base" else self.ids.hidden).append(stored_id)
        if self.grants_end is not None:
            # The grants drawn to end have ended, with no write, before any request.
            time.sleep(max(0.0, (self.grants_end - datetime.now(UTC)).total_seconds()) + 0.05)
        if with_hidden:
            self._hidden_membership(case.asker)
        self._metrics = self._scrape()[1]
        return statuses

    def _hidden_membership(self, asker: Asker) -> None:
        """Membership events the asker must learn nothing from: another tenant's, of the
        conversation the asker's observations are in; and, for an asker who may not
        attest presence (whose observations never take hearers from membership), their
        own tenant's."""
        tenants = [foreign(self.tenant)] + ([self.tenant] if asker.id != RELAY else [])
        changes = [
            {"person": person, "change": "join", "at": TIMES[0]} for person in PEOPLE[:3]
        ] + [{"person": PEOPLE[0], "change": "leave", "at": TIMES[2]}]
        for tenant in tenants:
            response = self.http.post(
                f"/v1/conversations/{CONVERSATION}/membership",
                json={"changes": changes},
                headers=as_(BUILDER, tenant, roles=BUILDER_ROLES),
            )
            assert response.status_code == 201, response.text

    # --- asking ---

    def _scrape(self) -> tuple[int, dict[str, float]]:
        response = self.http.get("/metrics")
        if response.status_code != 200:
            return response.status_code, {}
        return 200, counters(response.text)

    def _metrics_change(self) -> Any:
        status, now = self._scrape()
        if status != 200:
            return status
        before = self._metrics
        self._metrics = now
        changed = {k: now.get(k, 0.0) - before.get(k, 0.0) for k in {*now, *before}}
        return {k: v for k, v in sorted(changed.items()) if v}

    def _observe(
        self, request: str, response: httpx.Response, order: str = "as_sent"
    ) -> Observation:
        return self.record(request, response.status_code, body_of(response), order)

    def record(
        self,
        request: str,
        status: int,
        body: Any,
        order: str = "as_sent",
        requests: int = 1,
        limit: int | None = None,
    ) -> Observation:
        change = self._metrics_change() if METRICS_EACH else None
        seen = Observation(request, status, body, change, order, requests, limit)
        self.observations.append(seen)
        return seen

    def native(self, method: str, path: str, label: str, **kwargs: Any) -> Observation:
        response = self.http.request(method, path, headers=self.headers, **kwargs)
        return self._observe(label, response)

    def rest(self, method: str, path: str, label: str, **kwargs: Any) -> Observation:
        response = self.http.request(method, path, headers=self.api_key, **kwargs)
        return self._observe(label, response)

    def client(
        self, label: str, call: Callable[[QdrantClient], Any], order: str = "as_sent"
    ) -> Observation:
        return self._observe(label, self.raw_client(label, call), order)

    def raw_client(self, label: str, call: Callable[[QdrantClient], Any]) -> httpx.Response:
        """qdrant-client's raw answer to `call` (its own exceptions set aside)."""
        self.store.captured = None
        self.store.bearer = self.bearer
        with contextlib.suppress(UnexpectedResponse, ResponseHandlingException):
            call(self.qdrant)
        assert self.store.captured is not None, f"{label}: qdrant-client sent nothing"
        return self.store.captured

    def remember_mine(self, seen: Observation, ids: list[str] | None = None) -> None:
        """The asker's stored records, for later requests naming mine#k."""
        if seen.status == 201 and isinstance(seen.body, dict):
            self.ids.mine += [r["id"] for r in seen.body.get("records", [])]
        elif seen.status == 200 and ids:
            self.ids.mine += ids

    def run_all(self, ops: tuple[Op, ...]) -> None:
        for op in ops:
            RUNNERS[op.kind](self, op)
        if METRICS == "end" and ops:
            self.observations.append(
                Observation(
                    "/metrics: counters changed by all the requests",
                    0,
                    None,
                    self._metrics_change(),
                )
            )


# --- the requests ----------------------------------------------------------------------


def _filter(side: Side, raw: Any) -> qm.Filter | None:
    return None if raw is None else qm.Filter.model_validate(side.ids.resolve(raw))


def run_recall(side: Side, op: Op) -> None:
    body = {k: v for k, v in op.args.items() if v is not None and k != "vector_seed"}
    if op.args.get("vector_seed") is not None:
        body["vector"] = list(vector(op.args["vector_seed"]))
    response = side.http.post("/v1/recall", json=body, headers=side.headers)
    label = f"POST /v1/recall {_show(op.args)}"
    side.record(label, response.status_code, body_of(response), "ranked", limit=body.get("limit"))


def run_propositions(side: Side, op: Op) -> None:
    params: dict[str, Any] = {"audience": list(op.args["audience"])} if op.args["audience"] else {}
    for name in ("as_of", "depth", "observer"):
        if op.args.get(name):
            params[name] = op.args[name]
    if op.args.get("observed"):
        params["observed"] = list(op.args["observed"])
    label = f"GET /v1/propositions/{op.args['key']} {_show(op.args)}"
    path = f"/v1/propositions/{op.args['key']}"
    response = side.http.get(path, headers=side.headers, params=params)
    side.record(label, response.status_code, body_of(response), order="by_id")


def run_get(side: Side, op: Op) -> None:
    ref = op.args["ref"]
    params = {"as_of": op.args["as_of"]} if op.args.get("as_of") else None
    label = f"GET /v1/memories/{ref!r}" + (f"?as_of={op.args['as_of']}" if params else "")
    side.native("GET", f"/v1/memories/{side.ids.id(ref)}", label, params=params)


def run_history(side: Side, op: Op) -> None:
    ref = op.args["ref"]
    side.native(
        "GET", f"/v1/memories/{side.ids.id(ref)}/history", f"GET /v1/memories/{ref!r}/history"
    )


def run_query(side: Side, op: Op) -> None:
    a = op.args
    label = f"qdrant-client query_points {_show(a)}"
    side.client(
        label,
        lambda q: q.query_points(
            COLLECTION,
            query=list(vector(a["vector_seed"])),
            query_filter=_filter(side, a.get("filter")),
            limit=a["limit"],
            offset=a.get("offset"),
            score_threshold=a.get("score_threshold"),
            with_payload=a.get("with_payload", True),
        ),
    )


def run_search(side: Side, op: Op) -> None:
    a = op.args
    body: dict[str, Any] = {
        "vector": list(vector(a["vector_seed"])),
        "limit": a["limit"],
        "with_payload": a.get("with_payload", True),
    }
    if a.get("filter") is not None:
        body["filter"] = side.ids.resolve(a["filter"])
    if a.get("offset"):
        body["offset"] = a["offset"]
    side.rest("POST", f"{POINTS}/search", f"POST points/search {_show(a)}", json=body)


def run_scroll(side: Side, op: Op) -> None:
    """Page by page, following next_page_offset: one observation of all the pages."""
    a = op.args
    label = f"qdrant-client scroll (every page) {_show(a)}"
    offset: Any = None
    pages: list[list[Any]] = []
    for _ in range(MAX_PAGES):
        start = offset

        def page_from(q: QdrantClient, start: Any = start) -> Any:
            return q.scroll(
                COLLECTION,
                scroll_filter=_filter(side, a.get("filter")),
                limit=a["limit"],
                offset=start,
                with_payload=a.get("with_payload", True),
            )

        response = side.raw_client(label, page_from)
        body = body_of(response)
        pages.append([response.status_code, body])
        if response.status_code != 200 or not isinstance(body, dict):
            break
        offset = (body.get("result") or {}).get("next_page_offset")
        if offset is None:
            break
    side.record(label, pages[-1][0], {"pages": pages}, order="by_id", requests=len(pages))


def run_count(side: Side, op: Op) -> None:
    a = op.args
    side.client(
        f"qdrant-client count {_show(a)}",
        lambda q: q.count(
            COLLECTION, count_filter=_filter(side, a.get("filter")), exact=a["exact"]
        ),
    )


def run_retrieve(side: Side, op: Op) -> None:
    refs = op.args["refs"]
    ids = [side.ids.id(r) for r in refs]
    side.client(
        f"qdrant-client retrieve {refs!r}",
        lambda q: q.retrieve(COLLECTION, ids=ids, with_payload=True),
    )


def run_point(side: Side, op: Op) -> None:
    ref = op.args["ref"]
    side.rest("GET", f"{POINTS}/{side.ids.id(ref)}", f"GET points/{ref!r}")


def run_write(side: Side, op: Op) -> None:
    records: tuple[Rec, ...] = op.args["records"]
    bodies = [r.body(side.ids) for r in records]
    payload: Any = bodies if op.args["batch"] else bodies[0]
    seen = side.native("POST", "/v1/memories", f"POST /v1/memories {list(records)!r}", json=payload)
    side.remember_mine(seen)


def run_upsert(side: Side, op: Op) -> None:
    records: tuple[Rec, ...] = op.args["records"]
    points = []
    for r in records:
        body = r.body(side.ids, with_vector=False)
        point = body.pop("id", None) or chosen_id(f"point-{r.seed}")
        points.append(qm.PointStruct(id=point, vector=list(vector(r.seed)), payload=body))
    seen = side.client(
        f"qdrant-client upsert {list(records)!r}",
        lambda q: q.upsert(COLLECTION, points=points),
    )
    side.remember_mine(seen, [str(p.id) for p in points])


# The conversation the asker's observations are in (and its membership events).
CONVERSATION = "session-1"


def observation(a: dict[str, Any]) -> dict[str, Any]:
    """What was said (strategies.observations), as `POST /v1/observations` and the MCP
    `remember` tool both take it."""
    claims = []
    for seed, key, value, about, hedged in a["claims"]:
        proposition: dict[str, Any] = {"text": f"claim {seed} on {key} is {value}"}
        if not a.get("unkeyed"):
            proposition |= {"key": key, "value": value}
        claim: dict[str, Any] = {"proposition": proposition, "hedged": hedged}
        if about is not None:
            claim |= {"about": list(about) if isinstance(about, tuple) else about}
            claim["attitude"] = "believes"
        claims.append(claim)
    body: dict[str, Any] = {
        "speaker": a["speaker"],
        "source_id": CONVERSATION,
        "said_at": a["said_at"],
        "claims": claims,
    }
    if a["participants"] is not None:  # else: the conversation's members then
        body["participants"] = list(a["participants"])
    if a.get("scope"):
        body["access_scope"] = a["scope"]
    return body


def run_observe(side: Side, op: Op) -> None:
    a = op.args
    body = observation(a)
    seen = side.native("POST", "/v1/observations", f"POST /v1/observations {_show(a)}", json=body)
    side.remember_mine(seen)


def run_membership(side: Side, op: Op) -> None:
    """Joins and leaves of the asker's conversation: recorded, or refused alike."""
    a = op.args
    changes = [{"person": p, "change": c, "at": t} for p, c, t in a["changes"]]
    label = f"POST /v1/conversations/{CONVERSATION}/membership {_show(a)}"
    path = f"/v1/conversations/{CONVERSATION}/membership"
    side.native("POST", path, label, json={"changes": changes})


def run_witness(side: Side, op: Op) -> None:
    a = op.args
    body: dict[str, Any] = {
        "proposition": {
            "text": f"event {a['seed']} on {a['key']} is {a['value']}",
            "key": a["key"],
            "value": a["value"],
        },
        "witnessed_by": list(a["witnessed_by"]),
        "unnoticed": list(a["unnoticed"]),
        "at": a["at"],
        "source_id": "room-1",
        "readers": list(a["readers"]),
    }
    if a.get("scope"):
        body["access_scope"] = a["scope"]
    if a["announced"]:
        body["announcement"] = {"speaker": a["witnessed_by"][0], "to": "group:team"}
    seen = side.native("POST", "/v1/witnessed", f"POST /v1/witnessed {_show(a)}", json=body)
    side.remember_mine(seen)


def run_grant(side: Side, op: Op) -> None:
    body = {"reader": op.args["reader"], "categories": list(op.args["categories"])}
    if op.args.get("purpose"):
        body["purpose"] = op.args["purpose"]
    response = side.http.post("/v1/grants", json=body, headers=side.headers)
    seen = side._observe(f"POST /v1/grants {_show(op.args)}", response)
    if seen.status == 201 and isinstance(seen.body, dict):
        side.given.append(str(seen.body["grant_id"]))


def run_revoke(side: Side, op: Op) -> None:
    nth = op.args["nth"]
    grant = side.given[nth] if nth < len(side.given) else "00000000-0000-4000-8000-000000000000"
    side.native("DELETE", f"/v1/grants/{grant}", f"DELETE /v1/grants/given#{nth}")


def run_grants(side: Side, _: Op) -> None:
    side.native("GET", "/v1/grants", "GET /v1/grants")


def run_erase(side: Side, op: Op) -> None:
    """DELETE /v1/memories/{id}: erased, refused with reasons, or 404 as if missing."""
    ref, history = op.args["ref"], op.args["history"]
    params = {"history": "true"} if history else None
    label = f"DELETE /v1/memories/{ref!r}" + ("?history=true" if history else "")
    side.native("DELETE", f"/v1/memories/{side.ids.id(ref)}", label, params=params)


def _selector(side: Side, a: dict[str, Any]) -> dict[str, Any]:
    if a.get("refs") is not None:
        return {"points": [side.ids.id(r) for r in a["refs"]]}
    return {"filter": _filter(side, a.get("filter")) or qm.Filter()}


def run_delete(side: Side, op: Op) -> None:
    """qdrant-client delete, by ids or by filter: every version of each document."""
    a = op.args
    chosen = _selector(side, a)
    selector: Any = (
        qm.PointIdsList(points=chosen["points"])
        if "points" in chosen
        else qm.FilterSelector(filter=chosen["filter"])
    )
    side.client(
        f"qdrant-client delete {_show(a)}",
        lambda q: q.delete(COLLECTION, points_selector=selector),
        order=_refusal_order(chosen),
    )


def run_set_payload(side: Side, op: Op) -> None:
    """qdrant-client set_payload: a new version of each record named, or a refusal."""
    a = op.args
    chosen = _selector(side, a)
    side.client(
        f"qdrant-client set_payload {_show(a)}",
        lambda q: q.set_payload(
            COLLECTION,
            payload=a["payload"],
            points=chosen["points"] if "points" in chosen else chosen["filter"],
        ),
        order=_refusal_order(chosen),
    )


def _refusal_order(chosen: dict[str, Any]) -> str:
    """A filter's matches are refused in their ids' order (no list was given); points
    named by id, in the order sent."""
    return "as_sent" if "points" in chosen else "by_id"


# When a forget rule or an erasure request was made and last stepped: the wall clock
# of each store's own run, which must differ between two runs (as `recorded_at`).
_CLOCK = ("created_at", "updated_at", "finished_at", "lifted_at")


def _without_clock(body: Any) -> Any:
    if isinstance(body, dict):
        return {k: _without_clock(v) for k, v in body.items() if k not in _CLOCK}
    if isinstance(body, list):
        return [_without_clock(v) for v in body]
    return body


def _native_unclocked(side: Side, method: str, path: str, label: str, **kwargs: Any) -> Any:
    response = side.http.request(method, path, headers=side.headers, **kwargs)
    body = _without_clock(body_of(response))
    side.record(label, response.status_code, body)
    return body


def run_forget_rule(side: Side, op: Op) -> None:
    """POST /v1/forget-rules: the rule as answered and what its erasure did now."""
    rule = op.args["rule"]
    body = _native_unclocked(side, "POST", "/v1/forget-rules", f"forget-rule {rule}", json=rule)
    if isinstance(body, dict) and "rule" in body:
        side.ids.rules.append(body["rule"]["rule_id"])


def run_lift(side: Side, op: Op) -> None:
    """DELETE /v1/forget-rules/{id}: the asker's own rule (mine#k), or a missing one."""
    index = op.args["rule"]
    rule = side.ids.rules[index] if index < len(side.ids.rules) else MISSING_ID
    _native_unclocked(side, "DELETE", f"/v1/forget-rules/{rule}", f"lift rule#{index}")


def run_forget_rules(side: Side, op: Op) -> None:
    _native_unclocked(side, "GET", "/v1/forget-rules", "GET /v1/forget-rules")


def run_erasure(side: Side, op: Op) -> None:
    """POST /v1/erasures by content, and how far it got (counts, never content)."""
    request = op.args["request"]
    _native_unclocked(side, "POST", "/v1/erasures", f"erasure {request}", json=request)


def _mcp_arguments(side: Side, a: dict[str, Any]) -> dict[str, Any]:
    tool = a["tool"]
    if tool == "forget":
        sent = {"id": side.ids.id(a["ref"]), "history": a["history"]}
    elif tool in ("get_memory", "history"):
        sent = {"id": side.ids.id(a["ref"]), "as_of": a.get("as_of")}
    elif tool == "remember":
        sent = observation(a)
    else:
        sent = {k: list(v) if isinstance(v, tuple) else v for k, v in a.items() if k != "tool"}
    return {k: v for k, v in sent.items() if v is not None}


def run_mcp(side: Side, op: Op) -> None:
    """One tool call in a session of its own, as a host would make it; observed: the
    whole result (its text, its structured content, whether it is an error)."""
    a = op.args
    arguments = _mcp_arguments(side, a)

    async def call() -> CallToolResult:
        headers = {"Authorization": f"Bearer {side.bearer}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            streamable_http_client(f"{side.store.base}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await session.call_tool(a["tool"], arguments)

    result = anyio.run(call)
    text = "\n".join(c.text for c in result.content if isinstance(c, TextContent))
    label = f"MCP {a['tool']} {_show({k: v for k, v in a.items() if k != 'tool'})}"
    # Compared like the HTTP route's answer (the same model): a recall's items may
    # differ in order only among exactly equal scores (`tie_only`), views of a
    # proposition only as their generated ids do (`canonical`); the text with them.
    answer = _without_clock(dict(result.structured_content or {})) | {
        "mcp": {
            "is_error": result.is_error,
            "content_types": [c.type for c in result.content],
            "text": text,
        }
    }
    if a["tool"] == "recall":
        side.record(label, 200, answer, "ranked", limit=a["limit"])
        return
    side.record(label, 200, answer, "by_id" if a["tool"] == "what_do_people_think" else "as_sent")
    if a["tool"] == "remember" and not result.is_error:
        side.ids.mine += [r["id"] for r in (result.structured_content or {}).get("records", [])]


RUNNERS: dict[str, Callable[[Side, Op], None]] = {
    "recall": run_recall,
    "propositions": run_propositions,
    "get": run_get,
    "history": run_history,
    "query": run_query,
    "search": run_search,
    "scroll": run_scroll,
    "count": run_count,
    "retrieve": run_retrieve,
    "point": run_point,
    "write": run_write,
    "upsert": run_upsert,
    "observe": run_observe,
    "membership": run_membership,
    "witness": run_witness,
    "mcp": run_mcp,
    "erase": run_erase,
    "delete": run_delete,
    "set_payload": run_set_payload,
    "grant": run_grant,
    "revoke": run_revoke,
    "grants": run_grants,
    "forget_rule": run_forget_rule,
    "lift": run_lift,
    "forget_rules": run_forget_rules,
    "erasure": run_erasure,
}


def body_of(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text


def _show(args: dict[str, Any]) -> str:
    shown = {k: v for k, v in args.items() if v not in (None, [], (), False)}
    return " ".join(f"{k}={v!r}" for k, v in shown.items())


# --- normalising and comparing ---------------------------------------------------------

UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
TAKEN_OUT = frozenset(
    {
        "decision_id",
        "time",
        "recorded_at",
        "opa_decision_id",
        "opa_decision_ids",
        # When a grant was given or revoked: request timing.
        "granted_at",
        "revoked_at",
    }
)


class Namer:
    """Ids as names: known ones by what they are, the others in order of appearance
    within one answer (`fresh`: start again for each)."""

    def __init__(self, known: dict[str, str]) -> None:
        self.known = {k.lower(): v for k, v in known.items()}
        self.names: dict[str, str] = {}

    def fresh(self, value: Any = None) -> Namer:
        """Start again for one answer, naming the ids it generated in an order that does
        not depend on the ids themselves: two stores generate different random ids, so a
        list ordered by id (a scroll's pages) shows them in different orders, and naming
        in order of appearance would swap two generated names between the stores."""
        self.names = {}
        self._name_in_order(value)
        return self

    def _masked(self, value: Any) -> str:
        known = self.known

        def mask(match: re.Match[str]) -> str:
            literal = match.group(0).lower()
            return f"<{known[literal]}>" if literal in known else "<new>"

        return UUID.sub(mask, json.dumps(value, sort_keys=True))

    def _name_in_order(self, value: Any) -> None:
        if isinstance(value, dict):
            for key in sorted(value):
                if key not in TAKEN_OUT:
                    self._name_in_order(value[key])
        elif isinstance(value, list):
            for item in sorted(value, key=self._masked):
                self._name_in_order(item)
        elif isinstance(value, str):
            for match in UUID.finditer(value):
                self(match)

    def __call__(self, match: re.Match[str]) -> str:
        literal = match.group(0).lower()
        if literal in self.known:
            return f"<{self.known[literal]}>"
        if literal not in self.names:
            self.names[literal] = f"new{len(self.names) + 1}"
        return f"<{self.names[literal]}>"

    def normal(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: self.normal(v) for k, v in value.items() if k not in TAKEN_OUT}
        if isinstance(value, list):
            return [self.normal(v) for v in value]
        if isinstance(value, str):
            return UUID.sub(self, value)
        return value


def _ids_in(side: Side) -> set[str]:
    seen = json.dumps([[o.body, o.metrics] for o in side.observations])
    return {m.lower() for m in UUID.findall(seen)}


def known_ids(side: Side, hidden: list[str], other: Side) -> dict[str, str]:
    """Names of the ids this side knows: the world's; the asker's stored records
    (`mine#k`, or `new-mine#k` when the two stores gave that record different ids:
    the sidecar generated it); and ids both stores showed (derived from what both
    were sent, such as the id of a record upserted under a chosen point id), as
    themselves."""
    names = {MISSING_ID: "missing"}
    for kind, ids in (("base", side.ids.base), ("hidden", hidden)):
        for i, record_id in enumerate(ids):
            names[record_id] = f"{kind}#{i}"
    for k, record_id in enumerate(side.ids.mine):
        same = k < len(other.ids.mine) and other.ids.mine[k] == record_id
        names.setdefault(record_id, f"mine#{k}" if same else f"new-mine#{k}")
    for literal in _ids_in(side) & _ids_in(other):
        names.setdefault(literal, f"id:{literal}")
    return names


def normalised(side: Side, hidden: list[str], other: Side) -> list[Observation]:
    namer = Namer(known_ids(side, hidden, other))
    return [
        Observation(
            o.request,
            o.status,
            canonical(namer.fresh(o.body).normal(o.body), o.order),
            namer.normal(o.metrics),
            o.order,
            o.requests,
            o.limit,
        )
        for o in side.observations
    ]


def _sorted(items: Any) -> Any:
    if not isinstance(items, list):
        return items
    return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))


def _generated_records(body: dict[str, Any]) -> bool:
    """Whether a scroll or propositions answer holds a record with a generated id."""
    found: list[Any] = []
    for _, page in body.get("pages") or []:
        result = page.get("result") if isinstance(page, dict) else None
        if isinstance(result, dict):
            found += [p.get("id") for p in result.get("points") or [] if isinstance(p, dict)]
    for item in [*(body.get("perspectives") or []), body.get("world_state")]:
        if isinstance(item, dict):
            found.append(item.get("id"))
    return any(isinstance(i, str) and i.startswith("<new") for i in found)


def _generated(value: Any) -> bool:
    return "<new" in json.dumps(value)


def canonical(body: Any, order: str) -> Any:
    """A list ordered by record id is compared as a set when it holds an id the
    sidecar generated: two stores generate different random ids, so such a list
    comes in a different order (and a scroll splits its pages elsewhere) whatever
    else is stored. Only then; every other order is compared as it is. The views
    of a conflict count as such a list (the sidecar may order them by record id), and
    so do the views in `minds` (by valid time, then id)."""
    if not isinstance(body, dict):
        return body
    if order == "by_id" and body.get("error") in _REFUSALS and _generated(body):
        return _refusals_as_a_set(body)
    if isinstance(body.get("conflicts"), list) and _generated(body["conflicts"]):
        body = _text_relaxed(body, items=False) | {
            "conflicts": [
                {**c, "views": _sorted(c.get("views"))} if isinstance(c, dict) else c
                for c in body["conflicts"]
            ]
        }
    if order != "by_id" or not (_generated_records(body) or _derived_views_generated(body, order)):
        return body
    if "pages" in body:
        points: list[Any] = []
        shape: list[Any] = []
        for status, page in body["pages"]:
            result = page.get("result") if isinstance(page, dict) else None
            if status != 200 or not isinstance(result, dict):
                shape.append([status, page])
                continue
            points += result.get("points") or []
            rest = {k: v for k, v in page.items() if k != "result"}
            size = len(result.get("points") or [])
            shape.append([status, rest, size, result.get("next_page_offset") is not None])
        return {"pages (sizes, continued)": shape, "points (as a set)": _sorted(points)}
    if "perspectives" in body:
        body = body | {
            "perspectives": _sorted(body.get("perspectives")),
            "minds": _minds_as_sets(body.get("minds")),
        }
        body = _text_relaxed(body, items=True)
    return body


# The refusals that list one entry per record refused: a write's and an erasure's.
_REFUSALS = ("write_refused", "erasure_refused")


def _refusals_as_a_set(body: dict[str, Any]) -> dict[str, Any]:
    """A filter-selected write's or delete's refusals (one per matched point, in the
    points' id order) as a set, in the reasons and in the dialect's message that lists
    them."""
    status = body.get("status")
    if isinstance(status, dict) and isinstance(status.get("error"), str):
        head, _, listed = status["error"].partition(": ")
        status = status | {"error": [head, sorted(listed.split("; "))]}
    return body | {"reasons": _sorted(body.get("reasons")), "status": status}


def _derived_views_generated(body: Any, order: str) -> bool:
    """A propositions answer whose minds hold views derived from records the sidecar
    gave generated ids (their ids are derived from those): ordered by id among views
    that start together, like the records themselves."""
    return (
        order == "by_id"
        and isinstance(body, dict)
        and "minds" in body
        and _generated(body.get("minds"))
    )


def _text_relaxed(body: dict[str, Any], *, items: bool) -> dict[str, Any]:
    """An MCP answer's text (run_mcp) renders the answer's lists in the answer's order.
    Where the answer's comparison relaxes an order, the text's is relaxed alike: each
    disagreement's views as a set and, with `items`, each run of numbered items (an
    item with its indented lines, unnumbered) as a set; every other line stays put."""
    mcp = body.get("mcp")
    if not isinstance(mcp, dict):
        return body
    text = mcp.get("text")
    done = mcp.get("text (relaxed)")
    if text is None and isinstance(done, list) and all(isinstance(p, str) for p in done):
        # Relaxed already, but not its items (`tie_only` on a canonical body).
        text = "\n".join(done) if items else None
    if not isinstance(text, str):
        return body
    rest = {k: v for k, v in mcp.items() if k not in ("text", "text (relaxed)")}
    return body | {"mcp": rest | {"text (relaxed)": text_relaxed(text, items=items)}}


def text_relaxed(text: str, *, items: bool) -> list[Any]:
    parts: list[Any] = []
    run: list[list[str]] | None = None
    for line in text.splitlines():
        numbered = re.match(r"\d+\. ", line)
        if items and numbered:
            if run is None:
                run = []
                parts.append(run)
            run.append([line[numbered.end() :]])
            continue
        if items and run and line.startswith("   "):
            run[-1].append(line)
            continue
        run = None
        head, colon, views = line.partition(": ")
        if head.startswith("Disagreement about ") and views.endswith("."):
            line = head + colon + "; ".join(sorted(views[:-1].split("; "))) + "."
        parts.append(line)
    return [sorted(part) if isinstance(part, list) else part for part in parts]


def _minds_as_sets(minds: Any) -> Any:
    """A holder's views (and views of another mind) come by valid time, then record
    id (sidecar/answers/minds.py): views that start together are in generated-id order."""
    if not isinstance(minds, list):
        return minds
    return [
        mind | {"views": _sorted(mind.get("views")), "about": _minds_as_sets(mind.get("about"))}
        if isinstance(mind, dict) and "about" in mind
        else mind | {"views": _sorted(mind.get("views"))}
        if isinstance(mind, dict)
        else mind
        for mind in minds
    ]


class NoninterferenceViolated(AssertionError):
    pass


def compare(case: Case, tenant: str, a: list[Observation], b: list[Observation]) -> tuple[int, int]:
    """The request pairs that agree, and how many of them only up to a score tie;
    raises at the first pair that does not agree."""
    ties = 0
    for n in range(max(len(a), len(b))):
        left = a[n] if n < len(a) else None
        right = b[n] if n < len(b) else None
        if left is not None and right is not None:
            if left.key() == right.key():
                continue
            if tie_only(left, right):
                ties += 1
                continue
        raise NoninterferenceViolated(explain(case, tenant, n, left, right, a[:n]))
    return sum(o.requests for o in a), ties


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _conflicts(body: dict[str, Any]) -> list[Any]:
    return sorted(
        (c.get("key"), sorted(_canon(v) for v in c.get("views") or []))
        for c in body.get("conflicts") or []
        if isinstance(c, dict)
    )


def tie_only(a: Observation, b: Observation) -> bool:
    """Two recall answers that differ only among results of exactly equal score.

    A text query embeds with the sidecar's hashing embedder, and so do records
    written as observations (they carry no vector of their own), and a lexical
    search scores each record by its own term weights: records can score exactly
    alike, and the reader orders equal scores by record id, which two stores
    generate differently. Allowed, and counted: the same score
    sequence, the same results in every group of equal score but the last, and
    in the last too unless the answer filled its limit (then which of the equally
    scored results made the cut, and the verdict and conflicts that follow from
    them, may differ). Everything else (status, counters, `truncated`) agrees.
    """
    if a.order != "ranked" or (a.request, a.status, a.metrics) != (b.request, b.status, b.metrics):
        return False
    if not isinstance(a.body, dict) or not isinstance(b.body, dict):
        return False
    items_a, items_b = a.body.get("items"), b.body.get("items")
    if not isinstance(items_a, list) or not isinstance(items_b, list):
        return False
    scores = [i.get("score") if isinstance(i, dict) else None for i in items_a]
    if None in scores or scores != [
        i.get("score") if isinstance(i, dict) else None for i in items_b
    ]:
        return False
    groups: list[list[int]] = []
    for n, score in enumerate(scores):
        if groups and scores[groups[-1][0]] == score:
            groups[-1].append(n)
        else:
            groups.append([n])
    same = [
        sorted(_canon(items_a[n]) for n in g) == sorted(_canon(items_b[n]) for n in g)
        for g in groups
    ]
    filled = a.limit is not None and len(scores) == a.limit
    if not all(same[:-1]) or not (same[-1] or filled):
        return False
    if all(same) and not any(len(g) > 1 for g in groups):
        return False  # no tie at all: the difference is elsewhere
    # An MCP recall's text ("mcp") renders the items, verdict and conflicts.
    others = ("items", "verdict", "conflicts", "mcp")
    rest_a = {k: v for k, v in a.body.items() if k not in others}
    if rest_a != {k: v for k, v in b.body.items() if k not in others}:
        return False
    if all(same):
        # The same results in another order: the verdict, the conflicts and an MCP
        # answer's text (its items as a set) agree.
        return (
            a.body.get("verdict") == b.body.get("verdict")
            and _conflicts(a.body) == _conflicts(b.body)
            and _relaxed_text(a.body) == _relaxed_text(b.body)
        )
    # Which of the equally scored results made the cut differs, and so may the text
    # that lists them (its error flag and content types may not).
    return bool(_mcp_flags(a.body) == _mcp_flags(b.body))


def _relaxed_text(body: dict[str, Any]) -> Any:
    return _text_relaxed(body, items=True).get("mcp")


def _mcp_flags(body: dict[str, Any]) -> Any:
    mcp = body.get("mcp")
    if not isinstance(mcp, dict):
        return None
    return {k: v for k, v in mcp.items() if k in ("is_error", "content_types")}


def _dump(value: Any, limit: int = 2500) -> str:
    text = json.dumps(value, sort_keys=False, default=str)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two normalised bodies differ, as `path: A -> B` lines."""
    if isinstance(a, dict) and isinstance(b, dict):
        found = []
        for k in [*a, *(k for k in b if k not in a)]:
            if k not in a:
                found.append(f"{path}.{k}: (absent) -> {_dump(b[k], 200)}")
            elif k not in b:
                found.append(f"{path}.{k}: {_dump(a[k], 200)} -> (absent)")
            else:
                found += differences(a[k], b[k], f"{path}.{k}")
        return found
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in differences(x, y, f"{path}[{i}]")
        ]
    return [] if a == b else [f"{path or '.'}: {_dump(a, 300)} -> {_dump(b, 300)}"]


def explain(
    case: Case,
    tenant: str,
    n: int,
    left: Observation | None,
    right: Observation | None,
    before: list[Observation],
) -> str:
    def shown(o: Observation | None) -> str:
        if o is None:
            return "(no such request)"
        return f"{o.status} {_dump(o.body)}\n    metrics change: {_dump(o.metrics, 600)}"

    lines = [
        f"noninterference violated: asker {case.asker!r} (tenant {tenant}) sees a difference "
        f"at request {n}:",
        f"  {left.request if left else right.request if right else '?'}",
        f"A (without the hidden records): {shown(left)}",
        f"B (with them):                  {shown(right)}",
    ]
    if left is not None and right is not None:
        if left.status != right.status:
            lines.append(f"status: {left.status} -> {right.status}")
        lines += ["body: " + d for d in differences(left.body, right.body)[:12]]
        lines += ["metrics: " + d for d in differences(left.metrics, right.metrics)[:12]]
    lines.append(f"the example (hidden records in store B only): {case!r}")
    if before:
        lines.append("earlier requests (answered alike):")
        lines += [f"  {o.request} -> {o.status}" for o in before[-8:]]
    return "\n".join(lines)


# --- one example -------------------------------------------------------------------------


# How long the grants drawn to end last from when an example starts: they must be in
# force when given (whose.consent refuses an end before now), and have ended before the
# first request (each side waits for that instant: a wait for an instant, not a
# duration, so a slow machine only makes it shorter).
GRANTS_LAST_S = 1.0


class WorldDiverged(Exception):
    """A shared record was stored in one store and refused in the other: the stores
    would differ by more than hidden records (the example is not a valid one)."""


@dataclass
class Checked:
    pairs: int
    ties: int  # pairs that agreed only up to a score tie (see tie_only)
    hidden_stored: int
    shared_stored: int
    # Hidden records stored that derive from others (Plan.derivations).
    derived_stored: int = 0


def check(
    stores: Stores, case: Case, verify_hidden: bool = True, all_stored: bool = False
) -> Checked:
    """Build the case in both stores, ask, compare; raises NoninterferenceViolated.

    `verify_hidden=False` skips the check that every hidden record really is hidden
    from the asker (only the harness's own self-test wants that); `all_stored`
    requires every record of the world to be stored (a hand-written world that the
    write policy refuses would compare two empty stores)."""
    tenant = stores.pool.take()
    stores.enter(tenant, case.data)
    a = Side("A", stores.a, tenant, case.asker)
    b = Side("B", stores.b, tenant, case.asker)
    sides = {"A": a, "B": b}
    if any(g.ends for g in case.grants):
        # Long enough for both stores to give every grant and write the world.
        a.grants_end = b.grants_end = datetime.now(UTC) + timedelta(seconds=GRANTS_LAST_S)
    built_a, built_b = stores.both(lambda name, _: sides[name].build(case, with_hidden=name == "B"))
    if all_stored:
        refused = [s for s in [*built_a, *built_b] if s[2] != 201]
        assert not refused, f"the world was not stored as written: {refused}"
    shared_a = [s for s in built_a if s[0] == "base"]
    shared_b = [s for s in built_b if s[0] == "base"]
    if shared_a != shared_b:
        raise WorldDiverged(f"{shared_a} != {shared_b}")
    for record_id in b.ids.hidden if verify_hidden else []:
        stored = b.stored.get(record_id)
        assert stored is None or not case.asker.may_see(tenant, stored, case.grants_in_play()), (
            f"generator bug: hidden record {stored} is visible to {case.asker!r}"
        )
    a.ids.hidden = list(b.ids.hidden)
    stores.both(lambda name, _: sides[name].run_all(case.ops))
    pairs, ties = compare(
        case, tenant, normalised(a, b.ids.hidden, b), normalised(b, b.ids.hidden, a)
    )
    return Checked(
        pairs=pairs,
        ties=ties,
        hidden_stored=sum(1 for i in b.ids.hidden if i in b.stored),
        shared_stored=sum(1 for s in shared_a if s[2] == 201),
        derived_stored=sum(
            1
            for i in b.ids.hidden
            if ((b.stored.get(i) or {}).get("provenance") or {}).get("derived_from")
        ),
    )
