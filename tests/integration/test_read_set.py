"""What the disclosure decision reads, as the linked library computes it from the
compiled policy (native/linkedopa/readset.go, policy/readset.py), edit by edit.

Each case adds one denial (or a helper it calls) to the shipped policy and loads it
with the real linked evaluator; the read set must name what the edit reads, keep a
time exact when it is used other than against the instant asked about, and say why
when no bound holds (no shapes) or nothing may be cached (no cache). The gate cases
check what the plan does: a time kept exact keeps its bucket-boundary check, and the
local OPA server's bundle is analysed through the library as well.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from sidecar.audit.sqlite_sink import SqliteSink
from sidecar.audit.writer import AuditLog
from sidecar.auth.identity import Identity
from sidecar.policy.cache import LocalCache
from sidecar.policy.contract import DisclosureQuestion
from sidecar.policy.linked_opa import LinkedOpa, analyse_bundle
from sidecar.policy.local_opa import LocalOpa
from sidecar.policy.opa import PolicyClient
from sidecar.policy.readset import ReadSet
from sidecar.reads.gate import Gate
from sidecar.record import Stored
from tests.conftest import OPA_BINARY, OPA_LIBRARY, POLICY_DIR
from tests.loops import own_loop
from tests.oracle.edits import HEADER

Edits = dict[str, str]


def denial(body: str, imports: str = "", rest: str = "") -> Edits:
    lines = "".join(f"\t{line}\n" for line in body.strip().splitlines())
    text = (
        f'{HEADER}{imports}\nedited[record.id] contains "edited" if {{\n'
        f"\tsome record in disclosure.records\n{lines}}}\n{rest}"
    )
    return {"whose/disclosure/edited.rego": text}


def policy_with(folder: Path, edits: Edits) -> Path:
    policy = folder / "policy"
    shutil.copytree(POLICY_DIR, policy)
    for path, text in edits.items():
        (policy / path).parent.mkdir(parents=True, exist_ok=True)
        (policy / path).write_text(text)
    return policy


@pytest.fixture
def analyse(tmp_path: Path) -> Iterator[Any]:
    with own_loop() as loop:
        opened: list[LinkedOpa] = []

        def read_set(edits: Edits) -> ReadSet:
            folder = tmp_path / str(len(opened))
            linked = LinkedOpa(OPA_LIBRARY, policy_with(folder, edits), folder / "bundle", 5.0)
            loop.run_until_complete(linked.start())
            opened.append(linked)
            loaded = linked.read_set()
            assert loaded is not None
            return loaded[1]

        yield read_set
        for linked in opened:
            loop.run_until_complete(linked.close())
    loop.close()


def read(read_set: ReadSet) -> set[str]:
    return {".".join(p) for p in read_set.reads}


def sided(read_set: ReadSet) -> set[str]:
    return {".".join(p) for p in read_set.instants}


READS = [
    ("a field", denial("record.confidence < 0.5"), "confidence"),
    (
        "a helper through a parent import",
        {
            **denial("lib.quality.low(record)", "import data.whose.lib\n"),
            "whose/lib/quality/q.rego": (
                "package whose.lib.quality\n\nlow(r) if r.confidence < 0.5\n"
            ),
        },
        "confidence",
    ),
    (
        "a helper outside whose",
        {
            **denial("rules.bad(record)", "import data.acme.rules\n"),
            "acme/rules/r.rego": 'package acme.rules\n\nbad(r) if r.source_id == "x"\n',
        },
        "source_id",
    ),
    (
        "an else chain",
        denial(
            'grade(record) != "ok"',
            rest='\ngrade(r) := "low" if r.confidence < 0.3 else := "mid" if {\n'
            '\tr.provenance.writer == "relay"\n} else := "ok"\n',
        ),
        "provenance.writer",
    ),
    (
        "a comprehension",
        denial('"k1" in {x | some x in [record.proposition.key, "k0"]}'),
        "proposition.key",
    ),
    (
        "a data document by the record's field",
        denial("data.acme.flags[record.source_id]"),
        "source_id",
    ),
    (
        "a list's items",
        denial('some change in record.premise_changes\nchange.premise == "p"'),
        "premise_changes.*.premise",
    ),
    ("a presence test", denial("not record.supersedes"), "supersedes"),
    (
        "with, replacing the instant asked about",
        denial('not disclosure.applies(record) with input.as_of as "2026-02-01T00:00:00Z"'),
        "valid_at",
    ),
    (
        "with, replacing config",
        denial("record.confidence < data.whose.config.floor with data.whose.config.floor as 0.5"),
        "confidence",
    ),
]


@pytest.mark.parametrize(("edits", "field"), [c[1:] for c in READS], ids=[c[0] for c in READS])
def test_what_an_edit_reads_is_read(analyse: Any, edits: Edits, field: str) -> None:
    found = analyse(edits)
    assert found.shares, found.describe()
    assert field in read(found)
    # The id stays a key: shared on everything else.
    assert "id" not in read(found)


def test_what_a_decision_holds_is_read(analyse: Any) -> None:
    # A reason made of a field as it is (no builtin in between) differs from record to
    # record: the field is read. The id in one: no shapes.
    found = analyse(
        {
            "whose/disclosure/named.rego": (
                f"{HEADER}\nnamed[record.id] contains record.source_id if {{\n"
                "\tsome record in disclosure.records\n}\n"
            )
        }
    )
    assert found.shares, found.describe()
    assert "source_id" in read(found)
    # A field put into the decision as it is, with no builtin or comparison on the way.
    shipped = (POLICY_DIR / "whose" / "disclosure" / "disclosure.rego").read_text()
    hinted = analyse(
        {
            "whose/disclosure/disclosure.rego": shipped.replace(
                '"usable_as": use,', '"usable_as": record.hint,'
            )
        }
    )
    assert "hint" in read(hinted)
    with_id = analyse(
        {
            "whose/disclosure/named.rego": (
                f"{HEADER}\nnamed[record.id] contains record.id if {{\n"
                "\tsome record in disclosure.records\n}\n"
            )
        }
    )
    assert not with_id.shares


def test_the_id_as_the_key_of_a_helper_set_is_no_read(analyse: Any) -> None:
    helper = (
        "package whose.lib.weak\n\nimport data.whose.disclosure\n\n"
        "ids contains r.id if {\n\tsome r in disclosure.records\n\tr.confidence < 0.5\n}\n"
    )
    found = analyse(
        {
            **denial("record.id in weak.ids", "import data.whose.lib.weak\n"),
            "whose/lib/weak/w.rego": helper,
        }
    )
    assert found.shares, found.describe()
    assert "confidence" in read(found)


def test_a_rule_in_the_denials_package_that_is_no_denial_shares_nothing(analyse: Any) -> None:
    # Every rule of whose.disclosure.denials is a set of reasons per record id
    # (docs/policies.md): a set of ids there is looked up by id as if it were one.
    found = analyse(
        denial(
            "record.id in weak",
            rest=(
                "\nweak contains r.id if {\n\tsome r in disclosure.records\n"
                "\tr.confidence < 0.5\n}\n"
            ),
        )
    )
    assert not found.caches


TIMES = [
    (
        "an age",
        "time.parse_rfc3339_ns(record.valid_at) < time.parse_rfc3339_ns(disclosure.as_of) - 100",
    ),
    ("an age, the other way", "disclosure.as_of_ns - time.parse_rfc3339_ns(record.valid_at) > 100"),
    ("a time moved", "time.parse_rfc3339_ns(record.valid_at) + 100 < disclosure.as_of_ns"),
    ("the text of as_of", "record.valid_at < disclosure.as_of"),
]


@pytest.mark.parametrize("body", [c[1] for c in TIMES], ids=[c[0] for c in TIMES])
def test_arithmetic_on_the_instant_asked_about_keeps_the_time_exact_and_caches_nothing(
    analyse: Any, body: str
) -> None:
    found = analyse(denial(body))
    assert "valid_at" in read(found)
    assert "valid_at" not in sided(found)
    assert ("valid_at",) in found.compared or "valid_at" in read(found)
    assert not found.caches
    assert any("instant asked about" in why for why in found.uncacheable)
    assert any("whose/disclosure/edited.rego" in why for why in found.uncacheable)


def test_a_time_set_against_another_stays_exact_and_keeps_being_compared(analyse: Any) -> None:
    found = analyse(
        denial("time.parse_rfc3339_ns(record.valid_at) > time.parse_rfc3339_ns(record.recorded_at)")
    )
    assert found.caches, found.describe()
    assert {"valid_at", "recorded_at"} <= read(found)
    assert ("valid_at",) in found.compared


def test_a_new_time_compared_with_now_is_sided_and_compared(analyse: Any) -> None:
    found = analyse(denial("time.parse_rfc3339_ns(record.recorded_at) > disclosure.as_of_ns"))
    assert found.shares, found.describe()
    assert "recorded_at" in sided(found)
    assert ("recorded_at",) in found.compared


# A time set against the instant under a wildcard (`meta.*`), and one of its values read
# as it is (`meta.x`): found by a review of round fourteen.
WILDCARD_BESIDE_EXACT: Edits = {
    **denial('record.meta.x == "2026-12-03T12:00:01Z"'),
    "whose/disclosure/future.rego": denial(
        "some v in record.meta\ntime.parse_rfc3339_ns(v) > disclosure.as_of_ns"
    )["whose/disclosure/edited.rego"].replace("edited", "future"),
}


def test_a_time_under_a_wildcard_beside_one_read_as_it_is_is_kept_exact(analyse: Any) -> None:
    # meta.x is one of meta.*'s values: a shape holding meta.* by its side would lose
    # the value the other rule reads, so meta.* is read as it is.
    found = analyse(WILDCARD_BESIDE_EXACT)
    assert found.shares, found.describe()
    assert "meta.*" in read(found)
    assert "meta.*" not in sided(found)


UNBOUNDED = [
    ("walk", 'walk(record, [_, v])\nv == "x"', "walk"),
    ("json.marshal", 'contains(json.marshal(record), "x")', "json.marshal"),
    ("object.keys", "count(object.keys(record)) > 3", "object.keys"),
    ("a computed name", 'some k in ["a", "b"]\nrecord[k] == "x"', "computed name"),
    (
        "object.get by a computed name",
        'some k in ["a", "b"]\nobject.get(record, k, 0) == 1',
        "computed name",
    ),
    ("the id read", 'startswith(record.id, "0")', "id"),
    ("the id in a data document", "data.acme.flags[record.id]", "id"),
]


@pytest.mark.parametrize(("body", "why"), [c[1:] for c in UNBOUNDED], ids=[c[0] for c in UNBOUNDED])
def test_what_no_bound_holds_for_disables_shapes_and_says_where(
    analyse: Any, body: str, why: str
) -> None:
    found = analyse(denial(body))
    assert not found.shares
    assert found.caches, found.describe()
    assert any(why in reason and "edited.rego" in reason for reason in found.unbounded), (
        found.unbounded
    )


UNCACHEABLE = [
    ("the batch's size", "count(disclosure.records) > 3", "batch's records"),
    (
        "another record",
        "some other in disclosure.records\nother.supersedes == record.source_id",
        "other records",
    ),
    ("a position in the batch", "some i, r in disclosure.records\nr.id == record.id\ni == 0", ""),
    ("the clock", "time.now_ns() > 0", "differently from call to call"),
    (
        "another record's ruling, by the id a field names",
        "object.get(data.acme.weak, record.supersedes, false)",
        "the decisions of every record",
    ),
    (
        "another record's ruling, through a reference",
        "data.acme.weak[record.supersedes]",
        "other than the record's own id",
    ),
    (
        "with replacing a function",
        "data.whose.disclosure.applies(record) with time.parse_rfc3339_ns as data.acme.zero",
        "replaces a function",
    ),
]


@pytest.mark.parametrize(
    ("body", "why"), [c[1:] for c in UNCACHEABLE], ids=[c[0] for c in UNCACHEABLE]
)
def test_what_makes_decisions_depend_on_more_than_the_record_caches_nothing(
    analyse: Any, body: str, why: str
) -> None:
    edits = denial(body)
    edits["acme/zero.rego"] = (
        "package acme\n\nimport data.whose.disclosure\n\nzero(_) := 0\n\n"
        "weak[r.id] := true if {\n\tsome r in disclosure.records\n\tr.confidence < 0.5\n}\n"
    )
    found = analyse(edits)
    assert not found.caches
    assert not found.shares
    assert any(why in reason for reason in found.uncacheable), found.uncacheable


# --- the plan at work --------------------------------------------------------------------

NOW = datetime(2026, 12, 3, 12, 0, 0, tzinfo=UTC)


def stored(**fields: Any) -> Stored:
    payload = {
        "id": str(uuid.uuid4()),
        "tenant": "acme",
        "content": "c",
        "observer_id": "alice",
        "source_id": "s",
        "source": {"kind": "change_record"},
        "modality": "world_state",
        "audience": ["alice", "bob"],
        "recorded_at": "2026-01-01T00:00:00Z",
        "provenance": {"writer": "alice"},
    } | fields
    record = Stored.from_payload(payload)
    assert record is not None
    return record


async def decide(gate: Gate, now: datetime, records: list[Stored]) -> dict[str, bool]:
    question = DisclosureQuestion(Identity("bob", "acme"), [], "recall", now)
    async with gate.begin(question, "test") as disclosure:
        decided = await disclosure.decide(records)
    return {i: d.allow for i, d in decided.items()}


def count_asked(engine: Any) -> list[int]:
    """How many records each call to `engine`'s disclosure asked about, from now on."""
    asked: list[int] = []
    real = engine.disclosure

    async def counting(question: Any, records: Any, **kw: Any) -> Any:
        asked.append(len(records))
        return await real(question, records, **kw)

    engine.disclosure = counting
    return asked


@pytest.fixture
async def audit(tmp_path: Path) -> AsyncIterator[AuditLog]:
    log = AuditLog(SqliteSink(tmp_path / "audit.sqlite3"), None, queue_size=1000)
    yield log
    await log.close()


async def test_a_time_kept_exact_keeps_its_bucket_boundary_check(
    tmp_path: Path, audit: AuditLog
) -> None:
    # invalid_at is read other than set against the instant asked about (its type is
    # tested), so it is kept exact in the shape; it is still set against that instant
    # (whose.lib.validity), so an allow made a moment before it must not be served a
    # moment after, in the same bucket: a stale allow (the review of issue 35 found it).
    edits = denial("not is_string(record.invalid_at)")
    linked = LinkedOpa(OPA_LIBRARY, policy_with(tmp_path, edits), tmp_path / "bundle", 5.0)
    await linked.start()
    try:
        gate = Gate(linked, LocalCache(1000, ttl_s=60), audit, bucket_s=60)
        start = NOW.replace(second=0)
        # The revision heard first, so that these are decided by shape.
        await decide(gate, start, [stored(valid_at="2026-01-01T00:00:00Z")])
        ends = (start + timedelta(seconds=30)).isoformat()
        twins = [stored(valid_at="2026-01-01T00:00:00Z", invalid_at=ends) for _ in range(3)]
        before = await decide(gate, start + timedelta(seconds=29), twins)
        after = await decide(gate, start + timedelta(seconds=31), twins)
        # A current fact, then no longer what applies: withheld from a recall.
        assert set(before.values()) == {True}
        assert set(after.values()) == {False}
    finally:
        await linked.close()


async def test_a_time_set_only_against_the_instant_is_cached_by_its_side(
    tmp_path: Path, audit: AuditLog
) -> None:
    # A record written a moment ago has its valid_at inside the bucket. The shipped
    # policy only sets valid_at against the instant asked about, so a shape holds its
    # side of `now`, not its value: the key changes exactly when the decision may. The
    # decision is kept while the side holds (a recall of what was just written is not
    # asked of OPA again and again for a bucket), and asked afresh once it turns.
    linked = LinkedOpa(OPA_LIBRARY, policy_with(tmp_path, {}), tmp_path / "bundle", 5.0)
    await linked.start()
    try:
        gate = Gate(linked, LocalCache(1000, ttl_s=600), audit, bucket_s=60)
        start = NOW.replace(second=0)
        # The revision heard first, so that these are decided by shape.
        await decide(gate, start, [stored(valid_at="2026-01-01T00:00:00Z")])
        asked = count_asked(linked)
        begins = (start + timedelta(seconds=30)).isoformat()
        seen = []
        for second in (10, 20, 40, 50):
            asked.clear()
            twins = [stored(valid_at=begins) for _ in range(3)]
            decided = await decide(gate, start + timedelta(seconds=second), twins)
            seen.append((sum(asked), set(decided.values())))
        # Not yet what applies, then current: each side asked once, then served.
        assert seen == [(1, {False}), (0, {False}), (1, {True}), (0, {True})]
    finally:
        await linked.close()


async def test_twins_written_a_moment_ago_differing_in_a_time_read_as_it_is(
    tmp_path: Path, audit: AuditLog
) -> None:
    # Two records differing only in meta.x, both inside the bucket: the one allowed at
    # one instant must not lend its cached decision to the one denied at the next (a
    # stale allow, found by a review of round fourteen).
    linked = LinkedOpa(
        OPA_LIBRARY, policy_with(tmp_path, WILDCARD_BESIDE_EXACT), tmp_path / "bundle", 5.0
    )
    await linked.start()
    try:
        gate = Gate(linked, LocalCache(1000, ttl_s=600), audit, bucket_s=5)
        await decide(gate, NOW, [stored(valid_at="2026-01-01T00:00:00Z")])  # revision heard
        allowed = stored(valid_at="2026-01-01T00:00:00Z", meta={"x": "2026-12-03T12:00:02Z"})
        denied = stored(valid_at="2026-01-01T00:00:00Z", meta={"x": "2026-12-03T12:00:01Z"})
        assert await decide(gate, NOW.replace(second=3), [allowed]) == {allowed.id: True}
        assert await decide(gate, NOW.replace(second=4), [denied]) == {denied.id: False}
    finally:
        await linked.close()


async def test_the_local_opa_servers_bundle_is_analysed_and_shared_on(
    tmp_path: Path, audit: AuditLog
) -> None:
    opa = LocalOpa(OPA_BINARY, POLICY_DIR, tmp_path / "opa.log", tmp_path / "bundle")
    await opa.start()
    try:
        revision, read_set = analyse_bundle(OPA_LIBRARY, opa.bundle_dir)
        assert read_set.shares
        client = PolicyClient(
            opa.url, 5.0, unix_socket=str(opa.socket_path), read_set=(revision, read_set)
        )
        await client.start()
        try:
            gate = Gate(client, LocalCache(1000, ttl_s=60), audit, bucket_s=5)
            alike = [stored(valid_at="2026-01-01T00:00:00Z") for _ in range(10)]
            await decide(gate, NOW, alike)  # the revision heard
            assert gate.decider.plan(gate.decider.last_revision).mode == "shape"
            asked = count_asked(client)
            for _ in range(2):
                await decide(
                    gate, NOW, [stored(valid_at="2026-01-01T00:00:00Z") for _ in range(10)]
                )
            # Ten new records of one shape: its representative alone; ten more: from the
            # cache, OPA asked only to confirm its revision (a server's may change).
            assert asked == [1, 0]
        finally:
            await client.close()
    finally:
        await opa.stop()


async def test_an_opa_of_its_own_decides_each_record_alone(tmp_path: Path, audit: AuditLog) -> None:
    # A bundle revision, but no policy at hand to analyse (as with a deployment's own).
    opa = LocalOpa(OPA_BINARY, POLICY_DIR, tmp_path / "opa.log", tmp_path / "bundle")
    await opa.start()
    client = PolicyClient(opa.url, 5.0, unix_socket=str(opa.socket_path))
    await client.start()
    try:
        gate = Gate(client, LocalCache(1000, ttl_s=60), audit, bucket_s=5)
        await decide(gate, NOW, [stored(valid_at="2026-01-01T00:00:00Z")])
        assert gate.decider.last_revision is not None
        plan = gate.decider.plan(gate.decider.last_revision)
        assert plan.mode == "record"
        assert plan.shaper is None
        assert plan.caches
    finally:
        await client.close()
        await opa.stop()
