"""The leak oracle: random worlds, every identity, every read path, against the model.

Hypothesis builds a world (directory, records of every modality, audiences, scopes,
evidence, announcements, supersession chains), writes it through the real API of a
real sidecar whose real OPA holds the world's directory, and asks from every drawn
identity through every read path. For each answer it checks:

(a) what is disclosed is exactly what the reference model allows for the asker and
    every audience member (over the whole small world, so a rule that is too strict
    is caught too), with the model's usable_as and obligations;
(b) a record that exists but may not be disclosed answers exactly like a missing
    one (ids, decision ids and timings aside);
(c) the secret marker of every record the answer may not disclose appears nowhere
    in the body.

Then the last asker of each world tries to erase every record, by the three ways in
(`DELETE /v1/memories/{id}`, the MCP `forget` tool, the Qdrant dialect's delete):
(d) a record the asker may not see answers exactly like a missing one and stays;
    one the asker may see but not erase (not its holder or writer) is refused with
    that reason and stays; the rest are erased, with their chains closed over them
    (the model drops them and relinks), and the answer names the record asked for
    alone; no answer holds a marker; and every read path is checked again on what is
    left: counts after deletion, pages across erased points, the chains.
(e) before that, the same asker forgets one record's marker (a standing forget rule
    for the value) and erases the key `k0` by content (`POST /v1/erasures`, kind
    `proposition`): each report counts exactly the records the model lets the asker
    see, erases those it holds or wrote, keeps the rest; then every read path again.

Each world draws its policy data (issue 35), written into OPA's data beside its
directory: `config.erasure.on_derived` (flag, withdraw, erase) and
`config.stale.withhold` (any of superseded, erased, withdrawn, stale). Its records
include summaries of earlier ones (world.summarised_writes), and the model
(reference.note_changes, cascade) says what became of them: noted when a premise is
superseded while the world is written, or erased at the end (stale from then on,
withheld from everyone when the withhold list names the change), ended (withdraw) or
erased with it (erase), whoever may see them. (The OPA loads the policy as files, so
no decision is cached under an earlier world's data; each world's tenants are new.)

The number of examples comes from the Hypothesis profile (tests/conftest.py):
`WHOSE_HYPOTHESIS_PROFILE=long .venv/bin/pytest tests/oracle` runs thousands.
"""

from __future__ import annotations

import re
import shutil
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings

from sidecar.embed.hashing import HashingEmbedder
from tests.conftest import POLICY_DIR, REPORT, Backend, as_, start_opa, start_sidecar, stop
from tests.oracle.reference import (
    Config,
    Model,
    Person,
    Record,
    TenantDirectory,
    at,
    cascade,
    heard_chain,
    implied_paths,
    implied_view,
    implies,
    line,
    link_chains,
    mind_path,
    note_changes,
    status,
    superseded_in_mind,
    valid_at_instant,
)
from tests.oracle.world import (
    KEYS,
    RELAY,
    RELAY_ROLES,
    TIMES,
    Query,
    World,
    Write,
    chain,
    neighbour_record,
    worlds,
)

COLLECTION = "whose_memories"
VECTOR = HashingEmbedder(384).embed("the claim")
MARKER = re.compile(r"SECRET[0-9a-f]{32}")
STATS = {"worlds": 0, "records": 0, "refused": 0, "queries": 0, "requests": 0, "erased": 0}
# How the stored records could be used, and how often a get was allowed or withheld:
# evidence that the worlds reach every outcome, not just the easy ones.
OUTCOMES: Counter[str] = Counter()
# WHOSE_MAX_MIND_DEPTH of the served sidecar (the default).
MAX_DEPTH = 4


@dataclass
class Stack:
    sidecar: str
    opa: str
    # How many of the profile's worlds are built and checked on this stack.
    worlds: int = 1_000_000


# How many of the profile's worlds are built per store backend. In CI, a fifth of the
# ci profile's 150 on the embedded engine and a fifteenth on the Qdrant server (30 and
# 10; 100 and 30, then 60 and 20, as the suite was sized to fit in 12 minutes in CI):
# policy, model and read paths are the same on both stores, what the server changes
# (its filters, paging, point ids) is exercised by every world, each world still asks
# from every identity through every read path and erases everything, and the
# noninterference property (tests/noninterference) checks the channels this oracle
# does not look at. Other profiles (WHOSE_HYPOTHESIS_PROFILE=long: 2 000 and 666)
# build every world on the embedded engine and a third on the server.
SHARES = {"ci": {"edge": 1 / 5, "server": 1 / 15}}
OTHER_SHARES = {"edge": 1.0, "server": 1 / 3}


def worlds_built(backend: str) -> int:
    shares = SHARES.get(settings.get_current_profile_name(), OTHER_SHARES)
    return int(settings().max_examples * shares[backend])


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, store_backend: Backend) -> Iterator[Stack]:
    """A real OPA (the project's policies; each world adds its directory over OPA's
    data API) and one sidecar using it, on each store backend."""
    folder = tmp_path_factory.mktemp("oracle")
    opa, opa_process = start_opa(POLICY_DIR, folder / "opa.log")
    env = {"WHOSE_OPA_URL": opa} | store_backend.env()
    base, process = start_sidecar(folder / "sidecar", env=env)
    yield Stack(base, opa, worlds_built(store_backend.name))
    stop(process)
    stop(opa_process)
    counts = (
        "{worlds} worlds, {records} records stored ({refused} writes refused), "
        "{queries} identities asking, {requests} requests checked, {erased} records "
        "erased".format(**STATS)
    )
    REPORT.append(f"leak oracle ({store_backend.name} store): {counts}")
    REPORT.append(f"leak oracle outcomes: {dict(sorted(OUTCOMES.items()))}")
    STATS.update(dict.fromkeys(STATS, 0))
    OUTCOMES.clear()


class Checker:
    """One built world on the sidecar, and the checks on every answer about it."""

    def __init__(self, stack: Stack, http: httpx.Client, world: World) -> None:
        self.http = http
        self.world = world
        config = replace(
            Config.load(), on_derived=world.on_derived, withhold=frozenset(world.withhold)
        )
        self.model = Model(
            {world.tenant: world.directory, world.neighbour: world.directory}, config
        )
        self.records: dict[str, Record] = {}
        self.markers: dict[str, str] = {}  # record id -> its secret marker
        self.foreign_id = ""
        for tenant in (world.tenant, world.neighbour):
            url = f"{stack.opa}/v1/data/whose/directory/tenants/{tenant}"
            answer = httpx.put(url, json=world.directory.as_data({RELAY: []}), timeout=10)
            assert answer.status_code == 204, answer.text
        patch = [{"op": "replace", "path": f"/{k}", "value": v} for k, v in world.config().items()]
        answer = httpx.patch(f"{stack.opa}/v1/data/whose/config", json=patch, timeout=10)
        assert answer.status_code == 204, answer.text

    # --- building ---------------------------------------------------------------

    def build(self) -> None:
        writer = as_(RELAY, self.world.tenant, roles=RELAY_ROLES)
        for write in self.world.writes:
            first = self.write(writer, write, write.body)
            # Its summaries: each of the record, or of the summary before it.
            made: list[Record | None] = [first]
            for summary in write.summaries:
                premise = made[summary.premise] if summary.premise < len(made) else None
                if premise is None:
                    OUTCOMES["summary_without_premise"] += 1
                    made.append(None)
                    continue
                made.append(self.write(writer, summary, self.derivation(summary.body, premise)))
                OUTCOMES["stored_summary" if made[-1] else "refused_summary"] += 1
        self.give_grants()
        now = datetime.now(UTC)
        OUTCOMES.update(f"world_{self.model.usable_as(r, now)}" for r in self.records.values())
        neighbour = as_(RELAY, self.world.neighbour, roles=RELAY_ROLES)
        marker = f"SECRET{uuid.uuid4().hex}"
        response = self.http.post("/v1/memories", json=neighbour_record(marker), headers=neighbour)
        assert response.status_code == 201, response.text
        self.foreign_id = response.json()["records"][0]["id"]
        self.markers[self.foreign_id] = marker

    def give_grants(self) -> None:
        """The world's grants, given after its records (they reach what is stored); a
        revoked one taken back at once: the model holds those in force."""
        tenant = self.world.tenant
        for grant in self.world.grants:
            body = {"reader": grant.reader, "categories": list(grant.categories)}
            given = self.http.post("/v1/grants", json=body, headers=as_(grant.subject, tenant))
            # A grant to its own subject is refused (reader_is_subject).
            assert given.status_code in (201, 403), given.text
            if given.status_code != 201:
                OUTCOMES["grant_refused"] += 1
                continue
            if grant.revoked:
                gone = self.http.delete(
                    f"/v1/grants/{given.json()['grant_id']}", headers=as_(grant.subject, tenant)
                )
                assert gone.status_code == 200, gone.text
                OUTCOMES["grant_revoked"] += 1
                continue
            OUTCOMES["grant_given"] += 1
            reach = frozenset(grant.categories)
            self.model.grants.append((tenant, grant.subject, grant.reader, reach))

    def write(self, writer: dict[str, str], write: Write, body: dict[str, Any]) -> Record | None:
        """One write of the world; the first record it stored, if any."""
        links = {i: r.get("superseded_by") for i, r in self.records.items()}
        moment = datetime.now(UTC)
        response = self.http.post(f"/v1/{write.via}", json=body, headers=writer)
        if response.status_code == 422 and response.json()["error"] == "write_refused":
            STATS["refused"] += 1
            for problem in response.json()["reasons"]:
                OUTCOMES.update(f"refused_{reason}" for reason in problem["reasons"])
            return None
        assert response.status_code == 201, response.text
        stored = response.json()["records"]
        for record in stored:
            self._stored(record, write.marker)
        # A version this write gave a successor: what was derived from it is noted.
        superseded = {
            i: "superseded"
            for i, before in links.items()
            if self.records[i].get("superseded_by") not in (None, before)
        }
        OUTCOMES["noted_superseded"] += note_changes(self.records, superseded, moment)
        return self.records[stored[0]["id"]] if stored else None

    @staticmethod
    def derivation(body: dict[str, Any], premise: Record) -> dict[str, Any]:
        """A summary of `premise`, told to those of its audience the premise is told to
        (else to the premise's), in the premise's scope."""
        audience = [e for e in body["audience"] if e in premise["audience"]]
        body = body | {
            "audience": audience or list(premise["audience"]),
            "provenance": body["provenance"] | {"derived_from": [premise["id"]]},
        }
        if "access_scope" in premise:
            body["access_scope"] = premise["access_scope"]
        return body

    def _stored(self, record: Record, marker: str) -> None:
        STATS["records"] += 1
        OUTCOMES[f"stored_{record['modality']}"] += 1
        self.records[record["id"]] = record
        self.markers[record["id"]] = marker
        # The relay may not read what it writes: its answers name no other version.
        # Where each version sits is the model's to say (reference.link_chains).
        link_chains(list(self.records.values()))

    # --- asking -----------------------------------------------------------------

    def ask(self, query: Query) -> None:
        STATS["queries"] += 1
        self.query = query
        self.asker = Person(query.asker, self.world.tenant, frozenset(query.token_groups))
        self.headers = as_(query.asker, self.world.tenant, groups=",".join(query.token_groups))
        self.now = datetime.now(UTC)
        self.check_recall()
        self.check_chain()
        if (lived := self.lived_chain()) is not None:
            # A chain the world makes likely to be implied: the asker was there with them.
            self.query = replace(query, chain=lived, chain_observer=query.asker)
            self.check_chain()
            self.query = query
            # What the asker heard, and what they think the first of them heard.
            for hearers in ((), lived[:1]):
                self.check_heard(hearers, query.asker)
        self.check_heard(query.chain[:-1], query.chain_observer or query.asker)
        self.check_propositions()
        self.check_get()
        self.check_history()
        self.check_proxy_searches()
        self.check_proxy_by_id()

    def allowed(
        self, purpose: str, audience: Iterable[str] = (), as_of: datetime | None = None
    ) -> list[Record]:
        return [
            r
            for r in self.records.values()
            if self.model.allows(
                r, self.asker, purpose=purpose, now=self.now, audience=audience, as_of=as_of
            )
        ]

    def request(
        self, method: str, path: str, headers: dict[str, str] | None = None, **kwargs: Any
    ) -> httpx.Response:
        STATS["requests"] += 1
        response = self.http.request(method, path, headers=self.headers | (headers or {}), **kwargs)
        assert response.status_code < 500, (method, path, response.text)
        return response

    def no_secrets_but(self, response: httpx.Response, may_show: Iterable[str]) -> None:
        """(c): only the markers of records this answer may disclose appear in it."""
        shown = set(MARKER.findall(response.text))
        allowed = {self.markers[i] for i in may_show}
        leaked = shown - allowed
        assert not leaked, (
            f"{response.request.method} {response.request.url} disclosed "
            f"{[i for i, m in self.markers.items() if m in leaked]}"
        )

    def check_item(
        self,
        item: dict[str, Any],
        record_id: str,
        moment: datetime | None = None,
        in_mind: Iterable[Record] = (),
        record: Record | None = None,
    ) -> None:
        """(a) as what, at the instant asked about (as_of, else now): usable_as and
        obligations agree with the model; and the status (had this version ended by
        then, or, for a read of minds, been superseded in its holder's mind by one of
        `in_mind`, the versions the same question may be shown?)."""
        record = record or self.records[record_id]
        moment = moment or self.now
        use = self.model.usable_as(record, moment)
        OUTCOMES[f"usable_as_{use}"] += 1
        assert item["usable_as"] == use, (record_id, record, item, moment)
        assert set(item["obligations"]) == self.model.obligations(use), item
        expected = status(record, moment)
        if superseded_in_mind(record, in_mind, moment):
            expected = "superseded"
        OUTCOMES[f"status_{expected}"] += 1
        assert item["status"] == expected, (item, record, moment)

    def check_recall(self) -> None:
        q = self.query
        body: dict[str, Any] = {"query": "the claim", "limit": 100, "audience": q.audience}
        body["include_history"] = q.include_history
        as_of = None
        if q.as_of is not None:
            body["as_of"] = q.as_of
            as_of = at(q.as_of)
        response = self.request("POST", "/v1/recall", json=body)
        assert response.status_code == 200, response.text
        purpose = "history" if q.include_history else "recall"
        allowed = self.allowed(purpose, q.audience, as_of)
        moment = as_of or self.now
        # One current view per mind: a version another the question may be shown
        # supersedes in its holder's mind is no answer now (in a history: marked so).
        expected = {
            r["id"]
            for r in allowed
            if q.include_history or not superseded_in_mind(r, allowed, moment)
        }
        answer = response.json()
        got = [item["id"] for item in answer["items"]]
        assert sorted(got) == sorted(expected), ("recall", body, self.world)
        assert (answer["verdict"] == "abstain") == (not expected)
        for item in answer["items"]:
            self.check_item(item, item["id"], as_of, in_mind=allowed)
        self.no_secrets_but(response, expected)

    def visible_bases(self, audience: Iterable[str], moment: datetime) -> list[Record]:
        """The records the question may see that started by `moment` (whatever their end):
        what derived views come from."""
        hearers = self.model.hearers(self.asker, audience)
        return [
            r
            for r in self.records.values()
            if at(r["valid_at"]) <= moment
            and all(self.model.may_hear(r, p) for p in hearers)
            and not self.model.withheld(r)
        ]

    def lived_chain(self) -> tuple[str, ...] | None:
        """Others who were there with the asker at an event or a talk of the world, in
        turns with the asker (`[b, asker, b]`), or None."""
        for record in self.records.values():
            present = (record.get("source") or {}).get("participants") or []
            others = [p for p in present if p != self.asker.id]
            if self.asker.id in present and others:
                return (others[0], self.asker.id, others[-1])
        return None

    def check_chain(self) -> None:
        """Recall of one chain of minds: stored views of exactly that chain and the views
        the question's visible records imply, one current view a line."""
        q = self.query
        body: dict[str, Any] = {"query": "the claim", "limit": 100, "observed": list(q.chain)}
        if q.chain_observer is not None:
            body["observer"] = q.chain_observer
        as_of = None
        if q.as_of is not None:
            body["as_of"] = q.as_of
            as_of = at(q.as_of)
        moment = as_of or self.now
        response = self.request("POST", "/v1/recall", json=body)
        assert response.status_code == 200, response.text
        stored = [
            r
            for r in self.allowed("recall", (), as_of)
            if mind_path(r) == q.chain and q.chain_observer in (None, r.get("observer_id"))
        ]
        # Of the views implied, each line's from its latest record (the lower id on a tie).
        derived: dict[Any, Record] = {}
        bases = self.visible_bases((), moment)
        for base in sorted(bases, key=lambda b: (-at(b["valid_at"]).timestamp(), b["id"])):
            people = (base.get("source") or {}).get("participants") or []
            holders = [q.chain_observer] if q.chain_observer else [*people, base.get("observer_id")]
            for holder in dict.fromkeys(h for h in holders if h):
                for heard in (False, True):
                    if implies(base, holder, q.chain, heard):
                        view = implied_view(base, holder, q.chain, heard)
                        derived.setdefault(line(view), view)
        shown = [*stored, *derived.values()]
        expected = {
            (v["observer_id"], v.get("act"), v.get("derived_from") or v["id"])
            for v in shown
            if not superseded_in_mind(v, shown, moment)
        }
        items = response.json()["items"]
        got = {(i["observer_id"], i.get("act"), i.get("derived_from") or i["id"]) for i in items}
        assert got == expected, ("chain", body, self.world)
        OUTCOMES["chain_views"] += len(items)
        by_source = {
            (v["observer_id"], v.get("act"), v.get("derived_from") or v["id"]): v for v in shown
        }
        for item in items:
            view = by_source[
                (item["observer_id"], item.get("act"), item.get("derived_from") or item["id"])
            ]
            assert (item.get("observed_path") or [item["observed_id"]]) == list(q.chain), item
            self.check_item(item, item["id"], as_of, record=view)
        self.no_secrets_but(response, {s for _, _, s in expected})

    def check_heard(self, hearers: tuple[str, ...], observer: str) -> None:
        """Recall of what was heard from anyone (`heard`): what the observer heard (no
        hearers), or thinks the chain's last mind heard, from every statement the
        question may see, one current view a line, and nothing from a talk the asker
        may not see."""
        q = self.query
        body: dict[str, Any] = {"query": "the claim", "limit": 100, "heard": True}
        body |= (
            {"observer": observer, "observed": list(hearers)} if hearers else {"observer": observer}
        )
        as_of = at(q.as_of) if q.as_of is not None else None
        if q.as_of is not None:
            body["as_of"] = q.as_of
        moment = as_of or self.now
        response = self.request("POST", "/v1/recall", json=body)
        assert response.status_code == 200, response.text
        stored = [
            r
            for r in self.allowed("recall", (), as_of)
            if r.get("act") == "heard"
            and r.get("observer_id") == observer
            and heard_chain(r) == hearers
        ]
        derived: dict[Any, Record] = {}
        bases = self.visible_bases((), moment)
        for base in sorted(bases, key=lambda b: (-at(b["valid_at"]).timestamp(), b["id"])):
            if base.get("act") != "said" or not base.get("observer_id"):
                continue
            path = (*hearers, base["observer_id"], *mind_path(base))
            if len(path) <= MAX_DEPTH and implies(base, observer, path, True):
                view = implied_view(base, observer, path, True)
                derived.setdefault(line(view), view)
        shown = [*stored, *derived.values()]
        expected = {
            (v["observer_id"], v.get("derived_from") or v["id"])
            for v in shown
            if not superseded_in_mind(v, shown, moment)
        }
        items = response.json()["items"]
        got = {(i["observer_id"], i.get("derived_from") or i["id"]) for i in items}
        assert got == expected, ("heard", body, self.world)
        assert all(i["act"] == "heard" for i in items), items
        OUTCOMES["heard_views"] += len(items)
        self.no_secrets_but(response, {s for _, s in expected})

    def check_propositions(self) -> None:
        audience = self.query.audience
        params: dict[str, Any] = {"audience": audience}
        as_of = None
        if self.query.as_of is not None:
            params["as_of"] = self.query.as_of
            as_of = at(self.query.as_of)
        moment = as_of or self.now
        for key in [*KEYS, "k-missing"]:
            response = self.request("GET", f"/v1/propositions/{key}", params=params)
            assert response.status_code == 200, response.text
            allowed = [
                r
                for r in self.allowed("recall", audience, as_of)
                if (r.get("proposition") or {}).get("key") == key
            ]
            current = [r for r in allowed if not superseded_in_mind(r, allowed, moment)]
            expected = {r["id"] for r in current}
            answer = response.json()
            items = answer["perspectives"] + (
                [answer["world_state"]] if "world_state" in answer else []
            )
            assert sorted(i["id"] for i in items) == sorted(expected), ("propositions", key)
            for item in items:
                self.check_item(item, item["id"], as_of, in_mind=allowed)
            bases = [
                b
                for b in self.visible_bases(audience, moment)
                if (b.get("proposition") or {}).get("key") == key
            ]
            self.check_minds(answer["minds"], current, bases, moment)
            self.no_secrets_but(response, expected | {b["id"] for b in bases})

    def check_minds(
        self,
        minds: list[dict[str, Any]],
        current: list[Record],
        bases: list[Record],
        moment: datetime,
    ) -> None:
        """Every current view with a holder, stored or implied (depth 1: the default),
        under its holder and whose mind it is about: one a line, the latest."""
        implied: dict[Any, Record] = {}
        for base in sorted(bases, key=lambda b: (-at(b["valid_at"]).timestamp(), b["id"])):
            for holder, path, heard in sorted(implied_paths(base, 1)):
                view = implied_view(base, holder, path, heard)
                implied.setdefault(line(view), view)
        held = [r for r in current if r.get("observer_id") and len(mind_path(r)) <= 1]
        shown = [*held, *implied.values()]
        expected = {
            (v.get("derived_from") or v["id"], v["observer_id"], v.get("observed_id"), v.get("act"))
            for v in shown
            if not superseded_in_mind(v, shown, moment)
        }
        grouped = {
            (v.get("derived_from") or v["record_id"], m["holder"], None, v.get("act"))
            for m in minds
            for v in m["views"]
        }
        grouped |= {
            (v.get("derived_from") or v["record_id"], m["holder"], o["observed"], v.get("act"))
            for m in minds
            for o in m["about"]
            for v in o["views"]
        }
        assert grouped == expected, ("minds", minds, current, bases)
        OUTCOMES["minds_nested"] += sum(1 for _, _, observed, _ in expected if observed)
        OUTCOMES["minds_derived"] += len(implied)

    def check_get(self) -> None:
        missing = str(uuid.uuid4())
        as_of = self.query.as_of or TIMES[1]
        absent = {
            None: self._normal(self.request("GET", f"/v1/memories/{missing}"), missing),
            as_of: self._normal(
                self.request("GET", f"/v1/memories/{missing}", params={"as_of": as_of}), missing
            ),
        }
        for record_id in [*self.records, self.foreign_id]:
            record = self.records.get(record_id)
            # Without as_of: this very version, for purpose get.
            ok = record is not None and self.model.allows(
                record, self.asker, purpose="get", now=self.now
            )
            OUTCOMES["get_allowed" if ok else "get_withheld"] += 1
            response = self.request("GET", f"/v1/memories/{record_id}")
            self._one_or_absent(response, record_id, record_id if ok else None, absent[None])
            # With as_of: the chain's version that applied then, decided as recall at as_of,
            # provided the id asked for may be seen itself (else a forbidden id would
            # answer differently from a missing one).
            version = None
            if ok and record is not None:
                applying = [
                    v for v in chain(self.records, record_id) if valid_at_instant(v, at(as_of))
                ]
                if applying and self.model.allows(
                    applying[0], self.asker, purpose="recall", now=self.now, as_of=at(as_of)
                ):
                    version = applying[0]["id"]
            response = self.request("GET", f"/v1/memories/{record_id}", params={"as_of": as_of})
            self._one_or_absent(response, record_id, version, absent[as_of], at(as_of))

    def _one_or_absent(
        self,
        response: httpx.Response,
        asked: str,
        expected: str | None,
        absent: Any,
        moment: datetime | None = None,
    ) -> None:
        if expected is None:
            # (b): indistinguishable from a record that does not exist.
            assert self._normal(response, asked) == absent, (asked, response.text)
            self.no_secrets_but(response, [])
            return
        assert response.status_code == 200, (asked, response.text)
        answer = response.json()
        assert answer["record"]["id"] == expected
        self.check_item(answer["item"], expected, moment)
        self.no_secrets_but(response, [expected])

    def check_history(self) -> None:
        missing = str(uuid.uuid4())
        absent = self._normal(self.request("GET", f"/v1/memories/{missing}/history"), missing)
        for record_id in [*self.records, self.foreign_id]:
            response = self.request("GET", f"/v1/memories/{record_id}/history")
            record = self.records.get(record_id)
            if record is None or not self.model.allows(
                record, self.asker, purpose="history", now=self.now
            ):
                assert self._normal(response, record_id) == absent, (record_id, response.text)
                self.no_secrets_but(response, [])
                continue
            assert response.status_code == 200, response.text
            expected = [
                v["id"]
                for v in chain(self.records, record_id)
                if self.model.allows(v, self.asker, purpose="history", now=self.now)
            ]
            items = response.json()["items"]
            assert [i["id"] for i in items] == expected, ("history", record_id)
            for item in items:
                self.check_item(item, item["id"])
            self.no_secrets_but(response, expected)

    def check_proxy_searches(self) -> None:
        """Query, search, scroll and count: current versions, the asker alone."""
        expected = {r["id"] for r in self.allowed("recall")}
        base = f"/collections/{COLLECTION}/points"
        query = self.request(
            "POST", f"{base}/query", json={"query": VECTOR, "limit": 100, "with_payload": True}
        )
        search = self.request(
            "POST", f"{base}/search", json={"vector": VECTOR, "limit": 100, "with_payload": True}
        )
        scroll = self.request("POST", f"{base}/scroll", json={"limit": 100, "with_payload": True})
        for name, response, points in (
            ("query", query, query.json()["result"]["points"]),
            ("search", search, search.json()["result"]),
            ("scroll", scroll, scroll.json()["result"]["points"]),
        ):
            assert response.status_code == 200, response.text
            assert sorted(str(p["id"]) for p in points) == sorted(expected), (name, self.world)
            for point in points:
                self.check_item(point["payload"]["whose"], str(point["id"]))
            self.no_secrets_but(response, expected)
        self.check_pages(expected)
        count = self.request("POST", f"{base}/count", json={})
        assert count.json()["result"]["count"] == len(expected)
        self.check_query_api(expected)

    def check_query_api(self, expected: set[str]) -> None:
        """Fusion, MMR, batches, groups and facets (the query engine) disclose exactly
        what a plain query does: every point they rank, choose, group or count is one
        the asker may see, and all of those are there."""
        base = f"/collections/{COLLECTION}/points"
        near = {"query": VECTOR, "limit": 100}
        asks = {
            "fusion": {"prefetch": [near, near], "query": {"fusion": "rrf"}, "limit": 100},
            "mmr": {"query": {"nearest": VECTOR, "mmr": {"candidates_limit": 100}}, "limit": 100},
        }
        for name, body in asks.items():
            response = self.request("POST", f"{base}/query", json=body | {"with_payload": True})
            assert response.status_code == 200, response.text
            points = response.json()["result"]["points"]
            assert sorted(str(p["id"]) for p in points) == sorted(expected), (name, self.world)
            self.no_secrets_but(response, expected)
        batch = self.request("POST", f"{base}/query/batch", json={"searches": [near, near]})
        for answer in batch.json()["result"]:
            assert sorted(str(p["id"]) for p in answer["points"]) == sorted(expected), "batch"
        holders = Counter(
            str(self.records[i]["observer_id"])
            for i in expected
            if self.records[i].get("observer_id")
        )
        grouping = {
            "group_by": "observer_id",
            # At most limit · group_size candidates: within the query bounds.
            "group_size": 50,
            "limit": 50,
            "with_payload": True,
        }
        grouped = self.request("POST", f"{base}/query/groups", json=near | grouping)
        assert grouped.status_code == 200, grouped.text
        groups = grouped.json()["result"]["groups"]
        assert {g["id"]: len(g["hits"]) for g in groups} == dict(holders), "groups"
        self.no_secrets_but(grouped, expected)
        facet = self.request(
            "POST", f"/collections/{COLLECTION}/facet", json={"key": "observer_id", "limit": 100}
        )
        assert facet.status_code == 200, facet.text
        counted = {h["value"]: h["count"] for h in facet.json()["result"]["hits"]}
        assert counted == dict(holders), "facet"

    def check_pages(self, expected: set[str]) -> None:
        """Scroll and query page by page: the pages add up to what may be seen, and
        a page's continuation says nothing about points the asker may not see."""
        base = f"/collections/{COLLECTION}/points"
        scrolled: list[str] = []
        offset = None
        for _ in range(len(self.records) + 1):
            body = {"limit": 2, "with_payload": True} | ({"offset": offset} if offset else {})
            page = self.request("POST", f"{base}/scroll", json=body)
            assert page.status_code == 200, page.text
            scrolled += [str(p["id"]) for p in page.json()["result"]["points"]]
            self.no_secrets_but(page, expected)
            if (offset := page.json()["result"]["next_page_offset"]) is None:
                break
        assert sorted(scrolled) == sorted(expected), "scroll pages"
        queried: list[str] = []
        for start in range(0, len(expected) + 1, 2):
            body = {"query": VECTOR, "limit": 2, "offset": start, "with_payload": True}
            page = self.request("POST", f"{base}/query", json=body)
            queried += [str(p["id"]) for p in page.json()["result"]["points"]]
            self.no_secrets_but(page, expected)
        assert sorted(queried) == sorted(expected), "query pages"

    def check_proxy_by_id(self) -> None:
        base = f"/collections/{COLLECTION}/points"
        expected = {r["id"] for r in self.allowed("get")}
        missing = str(uuid.uuid4())
        asked = [*self.records, self.foreign_id, missing]
        retrieved = self.request("POST", base, json={"ids": asked, "with_payload": True})
        assert retrieved.status_code == 200, retrieved.text
        points = retrieved.json()["result"]
        assert sorted(str(p["id"]) for p in points) == sorted(expected), "retrieve"
        for point in points:
            self.check_item(point["payload"]["whose"], str(point["id"]))
        self.no_secrets_but(retrieved, expected)
        absent_one = self._normal(self.request("POST", base, json={"ids": [missing]}), missing)
        absent_get = self._normal(self.request("GET", f"{base}/{missing}"), missing)
        for record_id in [*self.records, self.foreign_id]:
            if record_id in expected:
                continue
            one = self.request("POST", base, json={"ids": [record_id]})
            assert self._normal(one, record_id) == absent_one, (record_id, one.text)
            got = self.request("GET", f"{base}/{record_id}")
            assert self._normal(got, record_id) == absent_get, (record_id, got.text)
            self.no_secrets_but(got, [])
        for record_id in expected:
            got = self.request("GET", f"{base}/{record_id}")
            assert got.status_code == 200, got.text
            self.check_item(got.json()["result"]["payload"]["whose"], record_id)
            self.no_secrets_but(got, [record_id])

    # --- erasing ----------------------------------------------------------------

    @staticmethod
    def holder(record: Record) -> str | None:
        """Its observer, else its speaker, else its writer."""
        source = record.get("source") or {}
        writer = (record.get("provenance") or {}).get("writer")
        return record.get("observer_id") or source.get("speaker") or writer

    def erasable(self, record: Record) -> bool:
        """The default erasure policy: the record's holder or its writer may erase it."""
        writer = (record.get("provenance") or {}).get("writer")
        return self.asker.id in (self.holder(record), writer)

    def erase_by_content(self) -> None:
        """(e) The last asker (no erasure officer) forgets one record's marker for good
        (a standing forget rule for that value), then erases the key `k0` by content:
        each reaches exactly the records the model lets the asker see (purpose `get`),
        erases those the asker holds or wrote and keeps the rest, and counts nothing
        else; no answer holds a marker; every read path is checked again after."""
        if not self.records:
            return
        target = sorted(self.records)[0]
        marker = self.markers[target]
        moment = datetime.now(UTC)
        seen = {
            i
            for i, r in self.records.items()
            if self.model.allows(r, self.asker, purpose="get", now=moment)
        }
        rule = self.request("POST", "/v1/forget-rules", json={"kind": "value", "value": marker})
        assert rule.status_code == 201, rule.text
        self.no_secrets_but(rule, [])
        # A witnessed event's or an observation's records share their write's marker.
        carrying = {i for i in seen if self.markers.get(i) == marker}
        self.content_erased(rule.json()["erasure"], carrying, seen, moment, "forget")
        moment = datetime.now(UTC)
        seen = {
            i
            for i, r in self.records.items()
            if self.model.allows(r, self.asker, purpose="get", now=moment)
        }
        keyed = {i for i in seen if (self.records[i].get("proposition") or {}).get("key") == "k0"}
        started = self.request("POST", "/v1/erasures", json={"kind": "proposition", "key": "k0"})
        assert started.status_code == 202, started.text
        self.no_secrets_but(started, [])
        self.content_erased(started.json(), keyed, keyed, moment, "proposition")
        self.ask(self.query)

    def content_erased(
        self,
        progress: dict[str, Any],
        matched: set[str],
        examined: set[str],
        moment: datetime,
        kind: str,
    ) -> None:
        """A content request's report against the model, and the model after it."""
        erasable = {i for i in matched if self.erasable(self.records[i])}
        kept = matched - erasable
        OUTCOMES[f"content_{kind}_erased"] += len(erasable)
        OUTCOMES[f"content_{kind}_kept"] += len(kept)
        assert progress["status"] == "done", progress
        assert progress["unrestricted"] is False, progress
        assert (progress["erased"], progress["kept"], progress["examined"]) == (
            len(erasable),
            len(kept),
            len(examined),
        ), (kind, progress, sorted(matched), sorted(examined))
        assert progress["kept_because"] == ({"not_holder_or_writer": len(kept)} if kept else {})
        if erasable:
            self.erased(erasable, moment)

    def erase_everything(self) -> None:
        """(d), then every read path again on what is left."""
        missing = str(uuid.uuid4())
        absent = {
            way: self._normal(self.erase(way, missing), missing)
            for way in ("delete", "forget", "proxy")
        }
        ways = ("delete", "forget", "proxy")
        before = len(self.records)
        for n, record_id in enumerate(sorted([*self.records, self.foreign_id])):
            record = self.records.get(record_id)
            if record is None and record_id != self.foreign_id:
                continue  # erased already, with a chain
            way = ways[n % 3]
            moment = datetime.now(UTC)
            visible = record is not None and self.model.allows(
                record, self.asker, purpose="get", now=moment
            )
            response = self.erase(way, record_id)
            self.no_secrets_but(response, [])
            if not visible:
                OUTCOMES[f"erase_{way}_as_missing"] += 1
                assert self._normal(response, record_id) == absent[way], (way, response.text)
                continue
            assert record is not None
            # The proxy erases a document: every version of its line.
            line = chain(self.records, record_id) if way == "proxy" else [record]
            if not all(self.erasable(r) for r in line):
                OUTCOMES[f"erase_{way}_refused"] += 1
                self.refused_as(way, response)
                continue
            OUTCOMES[f"erase_{way}_erased"] += 1
            # The record named, and nothing it cascaded to (the asker may not see that).
            if way == "delete":
                assert response.status_code == 200, response.text
                answered = response.json()["erased"]
                assert answered == [record_id], ("erased more than named", record_id, answered)
            elif way == "forget":
                answered = response.json()["result"]["structuredContent"]["erased"]
                assert answered == [record_id], ("erased more than named", record_id, answered)
            else:
                assert response.status_code == 200, response.text
                assert response.json()["result"]["status"] == "completed"
            self.erased({r["id"] for r in line}, moment)
        if len(self.records) < before:
            self.ask(self.query)

    def erased(self, named: set[str], moment: datetime) -> None:
        """The model after an erasure of `named` at `moment`: what was derived from them
        erased with them (on_derived erase) or noted and maybe ended; then they go, and
        their chains close over them."""
        on_derived = self.model.config.on_derived
        gone = named | (cascade(self.records, named) if on_derived == "erase" else set())
        withdraw = gone if on_derived == "withdraw" else set()
        noted = note_changes(
            self.records, dict.fromkeys(gone, "erased"), moment, withdraw=withdraw, skip=gone
        )
        OUTCOMES[f"erase_{on_derived}_derived"] += len(gone - named) + noted
        for record_id in gone:
            STATS["erased"] += 1
            del self.records[record_id]
        link_chains(list(self.records.values()))

    def erase(self, way: str, record_id: str) -> httpx.Response:
        if way == "delete":
            return self.request("DELETE", f"/v1/memories/{record_id}")
        if way == "proxy":
            body = {"points": [record_id]}
            return self.request("POST", f"/collections/{COLLECTION}/points/delete", json=body)
        message = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "forget", "arguments": {"id": record_id}},
        }
        headers = {"Accept": "application/json, text/event-stream"}
        return self.request("POST", "/mcp", json=message, headers=headers)

    def refused_as(self, way: str, response: httpx.Response) -> None:
        if way == "forget":
            result = response.json()["result"]["structuredContent"]
            assert result["error"] == "erasure_refused", result
            assert all(p["reasons"] == ["not_holder_or_writer"] for p in result["reasons"])
            return
        assert response.status_code == 403, response.text
        reasons = response.json()["reasons"]
        assert all(p["reasons"] == ["not_holder_or_writer"] for p in reasons), reasons

    @staticmethod
    def _normal(response: httpx.Response, asked: str) -> tuple[int, Any]:
        """Status and body with the asked id, decision ids and timings taken out."""

        def scrub(value: Any) -> Any:
            if isinstance(value, dict):
                return {k: scrub(v) for k, v in value.items() if k not in {"decision_id", "time"}}
            if isinstance(value, list):
                return [scrub(v) for v in value]
            if isinstance(value, str):
                return value.replace(asked, "<asked>")
            return value

        return response.status_code, scrub(response.json())


def test_no_read_path_discloses_what_the_model_forbids(stack: Stack) -> None:
    # Hypothesis inside the test: how many worlds depends on the backend, and a world
    # not built is not generated either (generating one costs as much as checking it).
    @settings(
        max_examples=max(stack.worlds, 1),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(world=worlds())
    def run(world: World) -> None:
        if STATS["worlds"] >= stack.worlds:
            return
        STATS["worlds"] += 1
        with httpx.Client(base_url=stack.sidecar, timeout=30) as http:
            checker = Checker(stack, http, world)
            checker.build()
            for query in world.queries:
                checker.ask(query)
            if world.queries:
                checker.erase_by_content()
                checker.erase_everything()

    run()


def test_the_checks_can_fail(stack: Stack) -> None:
    """A marker the model forbids is caught, and so is a disclosure it does not allow."""
    marker = f"SECRET{uuid.uuid4().hex}"
    body = neighbour_record(marker) | {"audience": ["p1"]}
    world = World(TenantDirectory(scopes={RELAY: set()}), [Write("memories", body, marker)], [])
    with httpx.Client(base_url=stack.sidecar, timeout=30) as http:
        checker = Checker(stack, http, world)
        checker.build()
        (record_id,) = checker.records
        checker.ask(Query("p1", [], [], None, False))  # p1 may see it: every check passes
        checker.model.allows = lambda *a, **k: False  # type: ignore[method-assign]
        with pytest.raises(AssertionError, match="recall"):
            checker.check_recall()
        got = http.get(f"/v1/memories/{record_id}", headers=checker.headers)
        with pytest.raises(AssertionError, match="disclosed"):
            checker.no_secrets_but(got, [])


def test_the_oracle_catches_a_broken_policy(tmp_path: Path) -> None:
    """With a scope check broken in the Rego, a small world shows the leak."""
    policies = tmp_path / "rego"
    shutil.copytree(POLICY_DIR, policies)
    visibility = policies / "whose" / "lib" / "visibility" / "visibility.rego"
    check = "\trecord.access_scope in sight.scopes\n"  # visible_to's scope check
    assert visibility.read_text().count(check) == 1
    visibility.write_text(visibility.read_text().replace(check, ""))
    opa, opa_process = start_opa(policies, tmp_path / "opa.log")
    base, process = start_sidecar(tmp_path / "sidecar", env={"WHOSE_OPA_URL": opa})
    try:
        marker = f"SECRET{uuid.uuid4().hex}"
        body = neighbour_record(marker) | {"audience": ["p1"], "access_scope": "s1"}
        directory_data = TenantDirectory(scopes={RELAY: {"s1"}, "p1": set()})
        world = World(directory_data, [Write("memories", body, marker)], [])
        with httpx.Client(base_url=base, timeout=30) as http:
            checker = Checker(Stack(base, opa), http, world)
            checker.build()
            with pytest.raises(AssertionError) as caught:
                checker.ask(Query("p1", [], [], None, False))
            (record_id,) = checker.records
            # It failed on the leaked record itself (GET answered 200 where 404 was due).
            assert record_id in str(caught.value)
    finally:
        stop(process)
        stop(opa_process)


def test_the_chain_check_sees_derived_views(stack: Stack) -> None:
    """A world where the chain asked about is implied: the check compares real views
    (not two empty answers), and a reference that implied nothing would fail it."""
    marker = f"SECRET{uuid.uuid4().hex}"
    event = {
        "proposition": {"text": f"the claim {marker}", "key": "k0", "value": 1},
        "witnessed_by": ["p0", "p1"],
        "at": TIMES[0],
        "source_id": "room-1",
    }
    world = World(TenantDirectory(scopes={RELAY: set()}), [Write("witnessed", event, marker)], [])
    with httpx.Client(base_url=stack.sidecar, timeout=30) as http:
        checker = Checker(stack, http, world)
        checker.build()
        before = OUTCOMES["chain_views"]
        checker.ask(Query("p0", [], [], None, False, chain=("p1", "p0"), chain_observer="p0"))
        # One view for the chain asked (p0's view of p1's view of p0), one for the chain
        # the asker lived (`lived_chain`: p0's view of p1's view of p0's view of p1).
        assert OUTCOMES["chain_views"] == before + 2
        checker.query = Query("p0", [], [], None, False, chain=("p1",), chain_observer="p0")
        checker.records = {}  # the model now implies nothing: the answer disagrees
        with pytest.raises((AssertionError, KeyError)):
            checker.check_chain()
