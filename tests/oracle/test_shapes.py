"""Deciding shapes (policy/shape.py) decides exactly as deciding each record.

On generated worlds — records of every modality from the leak oracle's strategies,
each with twins that differ from it only where the shipped policy reads nothing (ids,
storage times, source ids, derivations: its read set, computed from the compiled
policy, policy/readset.py) or in times moved around the instant asked about — the
gate's decisions, made per shape and reused across requests from its cache, must
equal OPA's decision about each record on its own. Real OPA (the linked evaluator,
on the shipped policy and a world directory). tests/oracle/test_readset.py does the
same over edited policies.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, get_args

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from sidecar.audit.sqlite_sink import SqliteSink
from sidecar.audit.writer import AuditLog
from sidecar.auth.identity import Identity
from sidecar.policy.cache import Keys, LocalCache
from sidecar.policy.contract import Decision, DisclosureQuestion, policy_view
from sidecar.policy.linked_opa import LinkedOpa
from sidecar.policy.readset import ReadSet
from sidecar.reads.gate import Gate
from sidecar.record import MemoryRecord, PremiseChange, Stored
from tests.conftest import OPA_LIBRARY, POLICY_DIR
from tests.loops import own_loop
from tests.oracle.reference import TenantDirectory
from tests.oracle.world import GROUPS, PEOPLE, RELAY, TIMES, TOKEN_ONLY_GROUP, record_writes

TENANT = "shapes"
DIRECTORY = TenantDirectory(
    scopes={"p0": {"s1"}, "p1": {"s1", "s2"}, "p2": set(), "p3": {"s2"}, RELAY: {"s1", "s2"}},
    groups={"g1": {"p0", "p1"}, "g2": {"p1", "p3"}},
)
# Each world's times and one second either side: twins land on, before and after the
# instants asked about.
NEAR_TIMES = [
    (datetime.fromisoformat(t) + timedelta(seconds=s)).isoformat().replace("+00:00", "Z")
    for t in TIMES
    for s in (-1, 0, 1)
]
BUCKET_S = 5.0


@dataclass
class Engine:
    linked: LinkedOpa
    loop: asyncio.AbstractEventLoop
    audit: AuditLog


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """The linked evaluator on the shipped policy, with this module's directory."""
    root = tmp_path_factory.mktemp("shapes")
    policy = root / "policy"
    shutil.copytree(POLICY_DIR, policy)
    directory = policy / "whose" / "directory" / "data.json"
    data = json.loads(directory.read_text())
    data["tenants"][TENANT] = DIRECTORY.as_data({RELAY: ["extractor", "authority"]})
    directory.write_text(json.dumps(data))
    with own_loop() as loop:
        linked = LinkedOpa(OPA_LIBRARY, policy, root / "bundle", 10.0)
        loop.run_until_complete(linked.start())
        audit = AuditLog(SqliteSink(root / "audit.sqlite3"), None, queue_size=10_000)
        try:
            yield Engine(linked, loop, audit)
        finally:
            loop.run_until_complete(linked.close())
        loop.close()


def as_stored(body: dict[str, Any], draw: st.DrawFn) -> dict[str, Any] | None:
    """The record as the sidecar would store it (None: the record model refuses it)."""
    extras: dict[str, Any] = {
        "id": str(uuid.uuid4()),
        "tenant": TENANT,
        "recorded_at": draw(st.sampled_from(NEAR_TIMES)),
        "provenance": {
            "writer": draw(st.sampled_from([RELAY, *PEOPLE])),
            "derived_from": draw(st.lists(st.uuids().map(str), max_size=1)),
        },
    }
    if draw(st.booleans()):
        # A derived record whose premise changed (set by the sidecar; lib/lineage/lineage.rego).
        extras["premise_changes"] = [
            {
                "premise": str(uuid.uuid4()),
                "change": draw(st.sampled_from(get_args(PremiseChange))),
                "recorded_at": draw(st.sampled_from(NEAR_TIMES)),
            }
        ]
    try:
        payload: dict[str, Any] = MemoryRecord.model_validate(body | extras).payload()
    except ValidationError:
        return None
    return payload


@st.composite
def twin(draw: st.DrawFn, record: dict[str, Any], move_times: bool) -> dict[str, Any]:
    """The record again, changed only in what the shape leaves out, and (`move_times`)
    in times that may or may not stay on their side of the question's instants."""
    other: dict[str, Any] = json.loads(json.dumps(record))
    other |= {
        "id": str(uuid.uuid4()),
        "recorded_at": draw(st.sampled_from(NEAR_TIMES)),
        "source_id": f"src-{draw(st.integers(0, 9))}",
        "confidence": draw(st.sampled_from([0.1, 0.5, 1.0])),
    }
    if other.get("proposition"):
        other["proposition"] = {"text": "another claim", "key": draw(st.sampled_from(["k0", "k9"]))}
    if other.get("provenance"):
        other["provenance"]["derived_from"] = [str(uuid.uuid4())]
    for change in other.get("premise_changes") or []:
        change |= {"premise": str(uuid.uuid4()), "recorded_at": draw(st.sampled_from(NEAR_TIMES))}
    if not move_times:
        return other
    other["valid_at"] = draw(st.sampled_from(NEAR_TIMES))
    if other.get("invalid_at"):
        other["invalid_at"] = draw(st.sampled_from(NEAR_TIMES))
    for item in other.get("evidence") or []:
        if "at" in item:
            item["at"] = draw(st.sampled_from(NEAR_TIMES))
    return other


@st.composite
def batches(draw: st.DrawFn) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(1, 6))):
        record = as_stored(draw(record_writes()).body, draw)
        if record is None:
            continue
        records += [record, draw(twin(record, move_times=False))]
        records += [draw(twin(record, move_times=True)) for _ in range(draw(st.integers(0, 2)))]
    return records


@st.composite
def questions(draw: st.DrawFn) -> DisclosureQuestion:
    asker = draw(st.sampled_from(PEOPLE))
    groups = draw(st.lists(st.sampled_from([*GROUPS, TOKEN_ONLY_GROUP]), unique=True, max_size=2))
    as_of = draw(st.none() | st.sampled_from(NEAR_TIMES))
    return DisclosureQuestion(
        Identity(asker, TENANT, groups=tuple(groups)),
        draw(st.lists(st.sampled_from([*PEOPLE, f"group:{GROUPS[0]}"]), unique=True, max_size=2)),
        draw(st.sampled_from(["recall", "history", "get"])),
        datetime.now(UTC),
        datetime.fromisoformat(as_of) if as_of else None,
    )


def decide_alone(
    engine: Engine, question: DisclosureQuestion, records: list[dict[str, Any]]
) -> dict[str, Decision]:
    batch = engine.loop.run_until_complete(engine.linked.disclosure(question, records))
    return batch.decisions


def decide_by_gate(
    engine: Engine, gate: Gate, question: DisclosureQuestion, records: list[dict[str, Any]]
) -> dict[str, Decision]:
    async def decide() -> dict[str, Decision]:
        stored = [Stored.from_payload(r) for r in records]
        assert None not in stored
        async with gate.begin(question, "shapes") as disclosure:
            return await disclosure.decide(stored)  # type: ignore[arg-type]

    return engine.loop.run_until_complete(decide())


@pytest.fixture(scope="module")
def gate(engine: Engine) -> Gate:
    """One gate for every example: its cache carries shapes from world to world."""
    return Gate(
        engine.linked, LocalCache(100_000, ttl_s=60), engine.audit, bucket_s=BUCKET_S, shapes=True
    )


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(records=batches(), question=questions())
def test_per_shape_decisions_are_per_record_decisions(
    engine: Engine, gate: Gate, records: list[dict[str, Any]], question: DisclosureQuestion
) -> None:
    alone = decide_alone(engine, question, records)
    # Twice: the first may be asked of OPA shape by shape, the second comes from the
    # cache (shapes seen in this example or an earlier one).
    for _ in range(2):
        shared = decide_by_gate(engine, gate, question, records)
        assert shared == alone
    # The gate did decide by shape, and twins shared one.
    plan = gate.decider.plan(gate.decider.last_revision)
    assert plan.mode == "shape"
    assert plan.shaper is not None
    keys = Keys(question, gate.decider.last_revision or "", BUCKET_S)
    shapes = [plan.shaper.shape_of(policy_view(r), keys.instants) for r in records]
    assert len({s.id for s in shapes if s is not None}) < len(records)


# One bucket (BUCKET_S from the world's second time): instants inside it, and times a
# record may hold there, each on either side of some of the instants.
BUCKET_START = datetime.fromisoformat(TIMES[1])
INSIDE_ONE_BUCKET = [
    BUCKET_START + timedelta(milliseconds=ms) for ms in (0, 1, 500, 999, 1000, 1001, 2500, 4999)
]
TIMES_IN_THE_BUCKET = [
    (BUCKET_START + timedelta(milliseconds=ms)).isoformat().replace("+00:00", "Z")
    for ms in (0, 1, 1000, 2500)
]


@st.composite
def batches_inside_one_bucket(draw: st.DrawFn) -> list[dict[str, Any]]:
    """`batches`, where some records begin to apply inside the bucket."""
    records = draw(batches())
    for record in records:
        if draw(st.booleans()):
            record["valid_at"] = draw(st.sampled_from(TIMES_IN_THE_BUCKET))
    return records


@st.composite
def questions_inside_one_bucket(draw: st.DrawFn) -> list[DisclosureQuestion]:
    """One question asked at two or three instants of the bucket (mostly about `now`)."""
    question = draw(questions())
    as_of = question.as_of if draw(st.integers(0, 3)) == 0 else None
    nows = draw(st.lists(st.sampled_from(INSIDE_ONE_BUCKET), min_size=2, max_size=3))
    return [dataclasses.replace(question, now=now, as_of=as_of) for now in nows]


@pytest.fixture(scope="module", params=[True, False], ids=["shapes", "records"])
def bucket_gate(engine: Engine, request: pytest.FixtureRequest) -> Gate:
    """A gate whose cache carries decisions between instants of one bucket."""
    return Gate(
        engine.linked,
        LocalCache(100_000, ttl_s=600),
        engine.audit,
        bucket_s=BUCKET_S,
        shapes=request.param,
    )


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(records=batches_inside_one_bucket(), asked=questions_inside_one_bucket())
def test_decisions_kept_inside_a_bucket_are_each_instants_own(
    engine: Engine,
    bucket_gate: Gate,
    records: list[dict[str, Any]],
    asked: list[DisclosureQuestion],
) -> None:
    # The same records, their times inside the bucket, asked about at instants on
    # either side of them: a decision kept at one instant (a shape holds its times by
    # their side, policy/cache.py) must be what OPA decides about each record at another.
    for question in asked:
        alone = decide_alone(engine, question, records)
        assert decide_by_gate(engine, bucket_gate, question, records) == alone


def test_what_the_shipped_policy_reads(engine: Engine, tmp_path: Path) -> None:
    loaded = engine.linked.read_set()
    assert loaded is not None
    _revision, read_set = loaded
    assert read_set == ReadSet(
        reads=(
            ("access_scope",),
            ("act",),
            ("audience",),
            ("modality",),
            ("observed_id",),
            ("observed_path",),
            ("observer_id",),
            ("tenant",),
            # What a subject's grant reaches: the record's categories and its one
            # subject (whose.disclosure.granted, lib/subjects people and holder).
            ("categories", "*"),
            ("provenance", "writer"),
            ("source", "channel"),
            ("source", "kind"),
            ("source", "participants"),
            ("source", "speaker"),
            ("evidence", "*", "by"),
            ("evidence", "*", "kind"),
            ("evidence", "*", "ref"),
            ("premise_changes", "*", "change"),
        ),
        instants=(("invalid_at",), ("valid_at",), ("evidence", "*", "at")),
        compared=(("invalid_at",), ("valid_at",), ("evidence", "*", "at")),
    )
    # Ids, storage times, sources, confidence and derivations are not read: shared on.
    read = {p[0] for p in (*read_set.reads, *read_set.instants)}
    for unread in ("id", "recorded_at", "source_id", "confidence", "proposition"):
        assert unread not in read
    assert [p for p in read_set.reads if p[0] == "provenance"] == [("provenance", "writer")]


class Counting:
    """The linked evaluator, counting what it is asked (every call goes through)."""

    def __init__(self, linked: LinkedOpa) -> None:
        self.linked = linked
        self.asked: list[int] = []

    async def disclosure(self, question: DisclosureQuestion, records: Any, **kw: Any) -> Any:
        self.asked.append(len(records))
        return await self.linked.disclosure(question, records, **kw)

    def standing_revision(self) -> str | None:
        return self.linked.standing_revision()

    def read_set(self) -> tuple[str, ReadSet] | None:
        return self.linked.read_set()


@pytest.mark.parametrize("shapes", [True, False])
def test_the_steady_state_asks_the_evaluator_nothing(engine: Engine, shapes: bool) -> None:
    counting = Counting(engine.linked)
    gate = Gate(
        counting,  # type: ignore[arg-type]
        LocalCache(1000, ttl_s=60),
        engine.audit,
        bucket_s=BUCKET_S,
        shapes=shapes,
    )
    base = MemoryRecord.model_validate(
        {
            "id": str(uuid.uuid4()),
            "tenant": TENANT,
            "content": "c",
            "observer_id": "p0",
            "source_id": "s",
            "source": {"kind": "conversation", "speaker": "p0"},
            "modality": "asserted",
            "audience": ["p1"],
            "valid_at": TIMES[0],
            "recorded_at": TIMES[0],
            "provenance": {"writer": "p0"},
        }
    ).payload()

    def alike() -> list[dict[str, Any]]:
        """Twenty records the policy cannot tell apart, never seen before."""
        return [base | {"id": str(uuid.uuid4()), "source_id": f"s{i}"} for i in range(20)]

    question = DisclosureQuestion(Identity("p1", TENANT), [], "recall", datetime.now(UTC))
    seen = alike()
    answers = [decide_by_gate(engine, gate, question, batch) for batch in (seen, alike(), alike())]
    answers.append(decide_by_gate(engine, gate, question, seen))
    assert all(d.allow for answer in answers for d in answer.values())
    if shapes:
        # Alone while no revision is heard, then the one shape once, then nothing: the
        # linked evaluator's revision stands, and every decision is in the cache.
        assert counting.asked == [20, 1]
    else:
        # Each new record on its own; records seen before from the cache.
        assert counting.asked == [20, 20, 20]
