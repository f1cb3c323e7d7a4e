"""Differential: decisions by shape equal OPA's decision per record, whatever the edit.

Cedar's way of holding an optimisation to its specification, here for the sidecar's
sharing of decisions (policy/shape.py, on what the compiled policy reads,
policy/readset.py): hypothesis draws an edit of the shipped policy as a security team
would write it (tests/oracle/edits.py), a batch of records with twins that differ only
where the shipped policy does not look or in times around the instants asked about,
a question, and two clocks (the second a moment to a bucket later). For every record,
at each clock, the decision the real gate serves (shapes, its cache carried from
example to example and from the first clock to the second) must equal OPA's decision
about that record on its own, and explain must agree with what is served.

Each drawn policy is loaded by the real linked evaluator, once (kept for the examples
that draw it again, with its gate and cache). The test asks only what the gate asks of
any policy, so it runs against the text guard the analysis replaced as well (the
report of issue 35 says how); there it fails.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from sidecar.audit.sqlite_sink import SqliteSink
from sidecar.audit.writer import AuditLog
from sidecar.auth.identity import Identity
from sidecar.policy.cache import LocalCache
from sidecar.policy.contract import Decision, DisclosureQuestion
from sidecar.policy.linked_opa import LinkedOpa
from sidecar.reads.gate import Gate
from sidecar.record import Stored
from tests.conftest import OPA_LIBRARY, POLICY_DIR
from tests.loops import own_loop
from tests.oracle.edits import AGES_NS, Edit, policy_edits
from tests.oracle.test_shapes import DIRECTORY, NEAR_TIMES, TENANT, as_stored, twin
from tests.oracle.world import GROUPS, PEOPLE, RELAY, TIMES, TOKEN_ONLY_GROUP, record_writes

BUCKET_S = 5.0
# Loaded policies kept (each a few MB in the library).
KEPT = 32


@dataclass
class Loaded:
    linked: LinkedOpa
    gate: Gate


class Policies:
    """Each drawn policy, loaded once by the linked evaluator, with its own gate."""

    def __init__(self, root: Path, loop: asyncio.AbstractEventLoop, audit: AuditLog) -> None:
        self.root = root
        self.loop = loop
        self.audit = audit
        self.base = root / "base"
        shutil.copytree(POLICY_DIR, self.base)
        directory = self.base / "whose" / "directory" / "data.json"
        data = json.loads(directory.read_text())
        data["tenants"][TENANT] = DIRECTORY.as_data({RELAY: ["extractor", "authority"]})
        directory.write_text(json.dumps(data))
        self.loaded: OrderedDict[str, Loaded] = OrderedDict()
        self.compiled = 0

    def get(self, edits: tuple[Edit, ...]) -> Loaded:
        files = sorted(f for edit in edits for f in edit.files)
        name = hashlib.sha256(json.dumps(files).encode()).hexdigest()[:16]
        known = self.loaded.get(name)
        if known is not None:
            self.loaded.move_to_end(name)
            return known
        folder = self.root / name
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(self.base, folder / "policy")
        for path, text in files:
            target = folder / "policy" / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        linked = LinkedOpa(OPA_LIBRARY, folder / "policy", folder / "bundle", 10.0)
        self.loop.run_until_complete(linked.start())
        self.compiled += 1
        gate = Gate(
            linked, LocalCache(100_000, ttl_s=60), self.audit, bucket_s=BUCKET_S, shapes=True
        )
        loaded = self.loaded[name] = Loaded(linked, gate)
        while len(self.loaded) > KEPT:
            _, old = self.loaded.popitem(last=False)
            self.loop.run_until_complete(old.linked.close())
        return loaded

    def close(self) -> None:
        for loaded in self.loaded.values():
            self.loop.run_until_complete(loaded.linked.close())


@pytest.fixture(scope="module")
def policies(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Policies]:
    root = tmp_path_factory.mktemp("edited")
    with own_loop() as loop:
        audit = AuditLog(SqliteSink(root / "audit.sqlite3"), None, queue_size=100_000)
        loaded = Policies(root, loop, audit)
        try:
            yield loaded
        finally:
            loaded.close()
        loop.close()


@st.composite
def batches(draw: st.DrawFn) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(1, 3))):
        record = as_stored(draw(record_writes()).body, draw)
        if record is None:
            continue
        records += [record, draw(twin(record, move_times=False))]
        records += [draw(twin(record, move_times=True)) for _ in range(draw(st.integers(0, 2)))]
    return records


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text)


# Clocks near the worlds' times, and an age past them (an age rule then straddles).
BASES = [_at(t) for t in TIMES[:3]] + [
    _at(t) + timedelta(microseconds=age // 1000) for t in TIMES[:3] for age in AGES_NS
]


@st.composite
def clocks(draw: st.DrawFn) -> tuple[datetime, datetime]:
    """Two instants a request may be asked at: the second the same or a little later,
    within the cache's bucket or past it."""
    base = draw(st.sampled_from(BASES))
    first = base + timedelta(milliseconds=draw(st.integers(-6000, 6000)))
    later = timedelta(milliseconds=draw(st.sampled_from([0, 1, 1500, 4000, 6000])))
    return first, first + later


@st.composite
def questions(draw: st.DrawFn) -> DisclosureQuestion:
    asker = draw(st.sampled_from(PEOPLE))
    groups = draw(st.lists(st.sampled_from([*GROUPS, TOKEN_ONLY_GROUP]), unique=True, max_size=2))
    as_of = draw(st.none() | st.sampled_from(NEAR_TIMES))
    return DisclosureQuestion(
        Identity(asker, TENANT, groups=tuple(groups)),
        draw(st.lists(st.sampled_from([*PEOPLE, f"group:{GROUPS[0]}"]), unique=True, max_size=2)),
        draw(st.sampled_from(["recall", "history", "get"])),
        datetime(2026, 1, 1, tzinfo=UTC),
        datetime.fromisoformat(as_of) if as_of else None,
    )


def served(loaded: Loaded, question: DisclosureQuestion, records: list[dict[str, Any]]) -> Any:
    async def decide() -> dict[str, Decision]:
        stored = [Stored.from_payload(r) for r in records]
        assert None not in stored
        async with loaded.gate.begin(question, "edits") as disclosure:
            return await disclosure.decide(stored)  # type: ignore[arg-type]

    return decide()


async def alone(
    linked: LinkedOpa, question: DisclosureQuestion, records: list[dict[str, Any]]
) -> dict[str, Decision]:
    """OPA's decision about each record on its own (a batch of one, its own id)."""
    decided = {}
    for record in records:
        batch = await linked.disclosure(question, [record])
        decided[record["id"]] = batch.decisions[record["id"]]
    return decided


async def explained(
    linked: LinkedOpa, question: DisclosureQuestion, records: list[dict[str, Any]]
) -> dict[str, Decision]:
    return {r["id"]: (await linked.explain(question, r))[0].decision for r in records}


@settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    edits=policy_edits(),
    records=batches(),
    question=questions(),
    at=clocks(),
)
def test_decisions_by_shape_are_decisions_per_record_under_any_edit(
    policies: Policies,
    edits: tuple[Edit, ...],
    records: list[dict[str, Any]],
    question: DisclosureQuestion,
    at: tuple[datetime, datetime],
) -> None:
    for edit in edits:
        note(edit.what)
    loaded = policies.get(edits)
    for now in at:
        asked = replace(question, now=now)
        note(f"asked at {now.isoformat()} (as of {asked.at.isoformat()})")
        expected = policies.loop.run_until_complete(alone(loaded.linked, asked, records))
        got = policies.loop.run_until_complete(served(loaded, asked, records))
        wrong = {i: (got[i], expected[i]) for i in expected if got[i] != expected[i]}
        assert not wrong, f"served (left) is not OPA's decision per record (right): {wrong}"
        told = policies.loop.run_until_complete(explained(loaded.linked, asked, records))
        assert told == got, "explain disagrees with what is served"
