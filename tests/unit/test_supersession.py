from __future__ import annotations

import uuid
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.writes import supersession
from sidecar.writes.supersession import Chain, Plan, Version, chain_of

Record = dict[str, Any]


def plan(
    new: list[Record],
    open_versions: dict[Chain, list[Record]],
    named: dict[str, Record],
    *,
    successors: Sequence[Record] = (),
    around: Sequence[Record] = (),
    undated: frozenset[str] | set[str] = frozenset(),
    blind: frozenset[str] | set[str] = frozenset(),
) -> Plan:
    """`supersession.plan` on records written as dicts: each dict is one Version
    (however often it is passed), so the links plan sets show on the dicts."""
    made: dict[int, Version] = {}

    def v(record: Record) -> Version:
        return made.setdefault(id(record), Version.of(record))

    return supersession.plan(
        [v(r) for r in new],
        {chain: [v(r) for r in rs] for chain, rs in open_versions.items()},
        {key: v(r) for key, r in named.items()},
        successors=[v(r) for r in successors],
        around=[v(r) for r in around],
        undated=undated,
        blind=blind,
    )


def possibly_left_open(
    open_versions: dict[Chain, list[Record]], named: dict[str, Record]
) -> list[str]:
    return supersession.possibly_left_open(
        {chain: [Version.of(r) for r in rs] for chain, rs in open_versions.items()},
        {key: Version.of(r) for key, r in named.items()},
    )


def rec(
    valid_at: str = "2026-10-01T00:00:00Z", key: str | None = "k", **extra: Any
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": str(uuid.uuid4()),
        "tenant": "acme",
        "observer_id": "alice",
        "valid_at": valid_at,
        "recorded_at": valid_at,
    }
    if key:
        record["proposition"] = {"text": "p", "key": key}
    return record | extra


CHAIN = Chain("acme", "alice", None, "k")


def test_chain_is_holder_observed_and_key() -> None:
    assert chain_of(rec()) == CHAIN
    assert chain_of(rec(observed_id="bob")) == Chain("acme", "alice", "bob", "k")
    assert chain_of(rec(key=None)) is None


def test_new_version_closes_the_head() -> None:
    old, new = rec(), rec("2026-10-05T00:00:00Z")
    result = plan([new], {CHAIN: [old]}, {})
    assert result.problems == []
    assert new["supersedes"] == old["id"]
    assert result.updates == [
        (old["id"], {"invalid_at": "2026-10-05T00:00:00Z", "superseded_by": new["id"]})
    ]


def test_first_version_has_nothing_to_close() -> None:
    new = rec()
    assert plan([new], {CHAIN: []}, {}).updates == []
    assert "supersedes" not in new


def test_explicit_supersedes_must_name_the_head() -> None:
    head = rec()
    stale = str(uuid.uuid4())
    result = plan([rec(supersedes=stale)], {CHAIN: [head]}, {})
    assert result.problems == [(0, "cannot_supersede")]
    assert result.updates == []


def test_a_version_that_starts_before_the_head_is_inserted_before_it() -> None:
    # Whether a write is stored never depends on the versions already there: a
    # backdated version goes where its valid time puts it (docs/security.md).
    head = rec("2026-10-10T00:00:00Z")
    new = rec("2026-10-01T00:00:00Z")
    result = plan([new], {CHAIN: [head]}, {}, around=[head])
    assert result.problems == []
    assert new["superseded_by"] == head["id"]
    assert new["invalid_at"] == head["valid_at"]
    assert "supersedes" not in new
    assert result.updates == [(head["id"], {"supersedes": new["id"]})]


def test_a_version_inserted_between_two_splits_the_one_that_applied() -> None:
    v1, v3 = rec("2026-10-01T00:00:00Z"), rec("2026-10-10T00:00:00Z")
    v1 |= _closed_by(v3)
    v3["supersedes"] = v1["id"]
    v2 = rec("2026-10-05T00:00:00Z")
    result = plan([v2], {CHAIN: [v3]}, {}, around=[v1, v3])
    assert result.problems == []
    assert (v2["supersedes"], v2["superseded_by"], v2["invalid_at"]) == (
        v1["id"],
        v3["id"],
        v3["valid_at"],
    )
    assert result.updates == [(v1["id"], _closed_by(v2)), (v3["id"], {"supersedes": v2["id"]})]


def test_an_explicit_supersedes_still_names_the_head_and_follows_it() -> None:
    head = rec("2026-10-10T00:00:00Z")
    early = rec("2026-10-01T00:00:00Z", supersedes=head["id"])
    result = plan([early], {CHAIN: [head]}, {})
    assert result.problems == [(0, "valid_at_before_current_version")]


def test_a_writer_that_may_not_read_its_record_cannot_name_a_version() -> None:
    head = rec()
    blind = rec("2026-10-02T00:00:00Z", supersedes=head["id"])
    result = plan([blind], {CHAIN: [head]}, {}, blind={blind["id"]})
    assert result.problems == [(0, "cannot_supersede")]
    # Without naming one, it is stored after the head like anyone's.
    plain = rec("2026-10-02T00:00:00Z")
    assert plan([plain], {CHAIN: [head]}, {}, blind={plain["id"]}).problems == []
    assert plain["supersedes"] == head["id"]


def test_an_undated_blind_version_does_not_follow_the_head_it_cannot_see() -> None:
    head, new = rec("2026-10-10T00:00:00Z"), rec("2026-10-09T23:59:59Z")
    plan([new], {CHAIN: [head]}, {}, undated={new["id"]}, blind={new["id"]}, around=[head])
    assert new["valid_at"] == "2026-10-09T23:59:59Z"  # its own instant: nothing learnt
    assert new["superseded_by"] == head["id"]


def test_an_undated_version_moves_up_to_its_predecessor_instead() -> None:
    head, new = rec("2026-10-10T00:00:00Z"), rec("2026-10-09T23:59:59Z")
    result = plan([new], {CHAIN: [head]}, {}, undated={new["id"]})
    assert result.problems == []
    assert new["valid_at"] == head["valid_at"]


def test_versions_in_one_batch_chain_in_order() -> None:
    first, second = rec(), rec("2026-10-02T00:00:00Z")
    result = plan([first, second], {CHAIN: []}, {})
    assert second["supersedes"] == first["id"]
    assert first["superseded_by"] == second["id"]
    assert result.updates == []  # both are new: their payloads carry the links


def test_two_open_versions_are_repaired_oldest_first() -> None:
    old = rec()
    orphan = rec(supersedes=old["id"])  # same instant: the link decides the order
    head = plan([], {CHAIN: [orphan, old]}, {})
    assert head.updates == [
        (old["id"], {"invalid_at": orphan["valid_at"], "superseded_by": orphan["id"]})
    ]


def test_keyless_record_replaces_only_the_same_holders_open_version() -> None:
    mine = rec(key=None)
    result = plan([rec(key=None, supersedes=mine["id"])], {}, {mine["id"]: mine})
    assert result.problems == []
    theirs = rec(key=None, observer_id="bob")
    refused = plan([rec(key=None, supersedes=theirs["id"])], {}, {theirs["id"]: theirs})
    assert refused.problems == [(0, "cannot_supersede")]


def test_keyless_record_cannot_fork_a_version() -> None:
    mine = rec(key=None)
    twins = [rec(key=None, supersedes=mine["id"]), rec(key=None, supersedes=mine["id"])]
    assert plan(twins, {}, {mine["id"]: mine}).problems == [(1, "cannot_supersede")]


def test_keyless_record_cannot_reach_into_a_keyed_chain() -> None:
    keyed = rec()
    assert plan([rec(key=None, supersedes=keyed["id"])], {}, {keyed["id"]: keyed}).problems == [
        (0, "cannot_supersede")
    ]


def test_a_world_state_chain_belongs_to_its_writer() -> None:
    fact = rec(observer_id=None, provenance={"writer": "release-bot"})
    rumour = rec(observer_id=None, provenance={"writer": "bob"})
    assert chain_of(fact) != chain_of(rumour)
    assert chain_of(fact) == Chain("acme", None, None, "k", "release-bot")


def test_a_relayed_world_state_chain_belongs_to_its_speaker() -> None:
    relayed = {"writer": "extractor-bot"}
    bobs = rec(
        observer_id=None, provenance=relayed, source={"kind": "conversation", "speaker": "bob"}
    )
    carols = rec(
        observer_id=None, provenance=relayed, source={"kind": "conversation", "speaker": "carol"}
    )
    assert chain_of(bobs) != chain_of(carols)
    assert chain_of(bobs) == Chain("acme", None, None, "k", speaker="bob")


def test_a_chain_is_told_to_one_audience() -> None:
    private = rec(audience=["alice"])
    told_bob = rec(audience=["bob", "alice"])
    scoped = rec(audience=["alice"], access_scope="launch-core")
    assert len({chain_of(private), chain_of(told_bob), chain_of(scoped)}) == 3
    assert chain_of(told_bob) == chain_of(rec(audience=["alice", "bob", "alice"]))


def test_nobody_else_may_name_a_world_state_record_to_replace() -> None:
    fact = rec(key=None, observer_id=None, provenance={"writer": "release-bot"})
    theirs = rec(key=None, observer_id=None, provenance={"writer": "bob"}, supersedes=fact["id"])
    assert plan([theirs], {}, {fact["id"]: fact}).problems == [(0, "cannot_supersede")]
    own = rec(
        key=None, observer_id=None, provenance={"writer": "release-bot"}, supersedes=fact["id"]
    )
    assert plan([own], {}, {fact["id"]: fact}).problems == []


def test_an_undated_version_does_not_follow_a_predecessor_far_in_the_future() -> None:
    # A far-future version blocks nothing: the new one goes before it.
    head, new = rec("2199-01-01T00:00:00Z"), rec("2026-10-01T00:00:00Z")
    result = plan([new], {CHAIN: [head]}, {}, undated={new["id"]}, around=[head])
    assert result.problems == []
    assert new["valid_at"] == "2026-10-01T00:00:00Z"
    assert new["superseded_by"] == head["id"]


def test_a_version_moved_up_past_its_own_end_is_refused() -> None:
    # Keyless, undated, with an end: moving its start up to follow its predecessor
    # would put the start after the end (found by review: it was stored, then 500).
    head = rec("2026-10-10T00:00:04Z", key=None)
    new = rec("2026-10-10T00:00:00Z", key=None, supersedes=head["id"])
    new["invalid_at"] = "2026-10-10T00:00:02Z"
    result = plan([new], {}, {head["id"]: head}, undated={new["id"]})
    assert result.problems == [(0, "invalid_at_before_valid_at")]
    assert result.updates == []


# --- writes cut short: a stored record names a version that is still open -------


def _closed_by(successor: dict[str, Any]) -> dict[str, Any]:
    return {"invalid_at": successor["valid_at"], "superseded_by": successor["id"]}


def _cut_short_batch() -> tuple[dict[str, Any], ...]:
    """v1 stored; the batch [v2, v3] stored (v2 closed by v3 in it); v1 never closed."""
    v1 = rec("2026-10-01T00:00:00Z")
    v3 = rec("2026-10-10T00:00:00Z")
    v2 = rec("2026-10-05T00:00:00Z", supersedes=v1["id"]) | _closed_by(v3)
    v3["supersedes"] = v2["id"]
    return v1, v2, v3


def test_an_open_version_with_a_stored_successor_is_closed_by_it() -> None:
    v1, v2, v3 = _cut_short_batch()
    result = plan([], {CHAIN: [v1, v3]}, {}, successors=[v2])
    # Not by time (v1 closed by v3, v3 relinked to v1): that drops v2 from the
    # chain and leaves v1 and v2 both current from 10-05 to 10-10.
    assert result.updates == [(v1["id"], _closed_by(v2))]


def test_the_next_version_follows_the_head_of_a_cut_short_batch() -> None:
    v1, v2, v3 = _cut_short_batch()
    v4 = rec("2026-10-20T00:00:00Z")
    result = plan([v4], {CHAIN: [v1, v3]}, {}, successors=[v2])
    assert result.problems == []
    assert v4["supersedes"] == v3["id"]
    assert result.updates == [(v1["id"], _closed_by(v2)), (v3["id"], _closed_by(v4))]


def test_what_a_successor_leaves_doubly_open_is_still_closed_by_time() -> None:
    v1, v2, v3 = _cut_short_batch()
    stray = rec("2026-10-15T00:00:00Z")  # open too, but named by nothing
    result = plan([], {CHAIN: [v1, v3, stray]}, {}, successors=[v2])
    assert result.updates == [
        (v1["id"], _closed_by(v2)),
        (stray["id"], {"supersedes": v3["id"]}),
        (v3["id"], _closed_by(stray)),
    ]


def test_closing_by_time_links_the_successor_before_closing_its_predecessor() -> None:
    # A repair cut short after the first update must leave evidence the next one
    # reads: the newer version naming the older while the older is still open.
    older, newer = rec(), rec("2026-10-02T00:00:00Z")
    assert plan([], {CHAIN: [older, newer]}, {}).updates == [
        (newer["id"], {"supersedes": older["id"]}),
        (older["id"], _closed_by(newer)),
    ]


def test_a_keyless_version_with_a_stored_successor_cannot_be_superseded_again() -> None:
    a = rec(key=None)
    b = rec("2026-10-02T00:00:00Z", key=None, supersedes=a["id"])
    c = rec("2026-10-03T00:00:00Z", key=None, supersedes=a["id"])
    assert plan([c], {}, {a["id"]: a}, successors=[b]).problems == [(0, "cannot_supersede")]


def test_a_keyless_version_with_a_stored_successor_is_closed_by_it() -> None:
    a = rec(key=None)
    b = rec("2026-10-02T00:00:00Z", key=None, supersedes=a["id"])
    assert plan([], {}, {a["id"]: a}, successors=[b]).updates == [(a["id"], _closed_by(b))]


def test_a_successor_outside_the_line_is_not_trusted() -> None:
    a = rec(key=None)
    bobs = rec("2026-10-02T00:00:00Z", key=None, observer_id="bob", supersedes=a["id"])
    keyed = rec("2026-10-02T00:00:00Z", supersedes=a["id"])
    earlier = rec("2026-09-01T00:00:00Z", key=None, supersedes=a["id"])
    assert plan([], {}, {a["id"]: a}, successors=[bobs, keyed, earlier]).updates == []


def test_of_two_stored_successors_the_earlier_closes_the_version() -> None:
    a = rec(key=None)
    first = rec("2026-10-02T00:00:00Z", key=None, supersedes=a["id"])
    second = rec("2026-10-03T00:00:00Z", key=None, supersedes=a["id"])
    assert plan([], {}, {a["id"]: a}, successors=[second, first]).updates == [
        (a["id"], _closed_by(first))
    ]


def test_only_a_chain_with_two_open_versions_or_a_named_keyless_version_is_suspect() -> None:
    head = rec()
    other = Chain("acme", "alice", None, "other")
    v1, _, v3 = _cut_short_batch()
    keyless, closed = rec(key=None), rec(key=None, invalid_at="2026-10-02T00:00:00Z")
    keyed = rec()
    suspects = possibly_left_open(
        {CHAIN: [v1, v3], other: [head]},
        {r["id"]: r for r in (keyless, closed, keyed)},
    )
    assert sorted(suspects) == sorted([v1["id"], v3["id"], keyless["id"]])
    # The common write: one open version, nothing named; no lookup at all.
    assert possibly_left_open({CHAIN: [head]}, {}) == []


# --- property: whatever order versions arrive in, a chain stays one line ---------


class _Chain:
    """A chain in memory, read the way the writer reads a store under the lock."""

    def __init__(self) -> None:
        self.stored: dict[str, dict[str, Any]] = {}
        self.late: list[dict[str, Any]] = []

    def land(self) -> None:
        """What a store applies after answering the writer with an error."""
        for record in self.late:
            self.stored[record["id"]] = record
        self.late = []

    def write(
        self, batch: list[dict[str, Any]], cut_after: int | None = None, lands_late: bool = False
    ) -> None:
        """`lands_late`: the store call that stores the batch answers with an error but
        is applied later, at `land()`, after other writes have read the chain."""
        heads = [dict(r) for r in self.stored.values() if "invalid_at" not in r]
        # Where the writer looks around: each new version that starts before a head,
        # and, when two are open, each open version, with what it names (writes/writer.py,
        # `_around`).
        starts = [
            new["valid_at"] for new in batch if any(h["valid_at"] > new["valid_at"] for h in heads)
        ]
        left = heads if len(heads) > 1 else []
        starts += [h["valid_at"] for h in left]
        named = [self.stored[n] for h in left if (n := h.get("supersedes")) in self.stored]
        around: dict[str, dict[str, Any]] = {r["id"]: dict(r) for r in named}
        for start in starts:
            then = [r for r in self.stored.values() if _applies(r, start)]
            firsts = [r for r in self.stored.values() if "supersedes" not in r]
            following = [self.stored[r["superseded_by"]] for r in then if "superseded_by" in r]
            around |= {r["id"]: dict(r) for r in then + firsts + following}
        suspects = {r["id"] for r in heads} if len(heads) > 1 else set()
        suspects |= set(around)
        successors = [dict(r) for r in self.stored.values() if r.get("supersedes") in suspects]
        linked = plan(
            batch, {CHAIN: heads}, {}, successors=successors, around=list(around.values())
        )
        assert linked.problems == []
        if lands_late:
            self.late += [dict(new) for new in batch]
            return  # the writer was told the store failed: it updates nothing
        for new in batch:
            self.stored[new["id"]] = dict(new)
        for count, (record_id, fields) in enumerate(linked.updates):
            if cut_after is not None and count >= cut_after:
                return  # the process died here
            self.stored[record_id] |= fields

    def repair(self) -> None:
        """What `whose repair` does for the chain: the whole chain, read at once."""
        versions = [dict(r) for r in self.stored.values()]
        still_open = [r for r in versions if "invalid_at" not in r]
        linked = plan([], {CHAIN: still_open}, {}, successors=versions, around=versions)
        for record_id, fields in linked.updates:
            self.stored[record_id] |= fields

    def check_one_line(self) -> None:
        versions = sorted(self.stored.values(), key=lambda r: (r["valid_at"], r["recorded_at"]))
        assert [r for r in versions if "invalid_at" not in r] == versions[-1:]
        for older, newer in pairwise(versions):
            assert older["superseded_by"] == newer["id"], (older, newer)
            assert older["invalid_at"] == newer["valid_at"]
            assert newer["supersedes"] == older["id"]
        assert "supersedes" not in versions[0]


def _applies(record: dict[str, Any], instant: str) -> bool:
    start, end = str(record["valid_at"]), str(record.get("invalid_at", "9999"))
    return start <= instant < end


DAYS = st.integers(1, 28).map(lambda d: f"2026-10-{d:02d}T00:00:00Z")


@settings(max_examples=300, deadline=None)
@given(
    batches=st.lists(st.lists(DAYS, min_size=1, max_size=3, unique=True), min_size=1, max_size=6),
    cut=st.none() | st.tuples(st.integers(0, 5), st.integers(0, 3)),
)
def test_any_arrival_order_keeps_one_line_and_a_cut_short_write_is_mended(
    batches: list[list[str]], cut: tuple[int, int] | None
) -> None:
    chain = _Chain()
    seen: set[str] = set()
    for number, days in enumerate(batches):
        days = [d for d in days if d not in seen]  # one version per instant
        seen |= set(days)
        if not days:
            continue
        batch = [rec(d, recorded_at=f"{number:04d}") for d in days]
        cut_after = cut[1] if cut is not None and cut[0] == number else None
        chain.write(batch, cut_after)
        if cut_after is None and (cut is None or cut[0] > number):
            chain.check_one_line()  # nothing cut short yet: one line after every write
    # Whatever was cut short, the next write mends an append, and `whose repair`
    # what an insertion left in the middle of the line.
    chain.write([rec("2026-11-01T00:00:00Z", recorded_at="9999")])
    chain.repair()
    chain.check_one_line()


# --- a store call that fails but is applied later -----------------------------------
# A store that times out may still apply the write after the writer gave up and let
# go of the lock: the version lands after the next writer read the chain and
# superseded the same head. The next write must mend that fork into one line.


def _forked(later: int) -> tuple[_Chain, list[dict[str, Any]]]:
    """v1 stored; v2's store call fails but lands after `later` more versions."""
    chain = _Chain()
    versions = [rec(f"2026-10-{day:02d}T00:00:00Z", recorded_at=f"{day:04d}") for day in (1, 2)]
    chain.write([versions[0]])
    chain.write([versions[1]], lands_late=True)
    for day in range(3, 3 + later):
        versions.append(rec(f"2026-10-{day:02d}T00:00:00Z", recorded_at=f"{day:04d}"))
        chain.write([versions[-1]])
    chain.land()
    return chain, versions


def test_a_version_that_lands_after_the_next_one_is_placed_before_it() -> None:
    chain, (v1, v2, v3) = _forked(later=1)
    # The fork: v1 closed by v3, and both v2 and v3 name v1.
    assert (chain.stored[v1["id"]]["superseded_by"], v2["supersedes"]) == (v3["id"], v1["id"])
    chain.write([rec("2026-10-20T00:00:00Z", recorded_at="0020")])
    chain.check_one_line()


def test_a_version_that_lands_after_two_later_ones_is_placed_between_them() -> None:
    chain, (_, v2, v3, v4) = _forked(later=2)
    chain.write([rec("2026-10-20T00:00:00Z", recorded_at="0020")])
    chain.check_one_line()
    assert chain.stored[v3["id"]]["supersedes"] == v2["id"]
    assert chain.stored[v4["id"]]["supersedes"] == v3["id"]


@settings(max_examples=200, deadline=None)
@given(count=st.integers(2, 8), data=st.data(), cut=st.none() | st.integers(0, 3))
def test_appends_one_of_which_lands_late_are_mended_by_the_next_write(
    count: int, data: st.DataObject, cut: int | None
) -> None:
    """Appends in time order (as writers make them under the lock), one of which
    lands after `after` more writes; the mending write may itself be cut short."""
    which = data.draw(st.integers(0, count - 1), label="which")
    after = data.draw(st.integers(1, count - which), label="after")
    chain = _Chain()
    for day in range(count):
        version = rec(f"2026-10-{day + 1:02d}T00:00:00Z", recorded_at=f"{day:04d}")
        chain.write([version], lands_late=day == which)
        if day == which + after:
            chain.land()
    chain.land()
    if cut is not None:
        chain.write([rec("2026-10-20T00:00:00Z", recorded_at="0020")], cut_after=cut)
    chain.write([rec("2026-10-21T00:00:00Z", recorded_at="0021")])
    chain.check_one_line()


def test_a_nested_view_is_a_chain_of_its_whole_chain_of_minds() -> None:
    from sidecar.writes.supersession import of_chain

    one = rec(observed_id="bob", observed_path=["bob", "carol"])
    other = rec(observed_id="bob", observed_path=["bob", "dave"])
    reordered = rec(observed_id="bob", observed_path=["bob", "carol", "bob"])
    assert chain_of(one) != chain_of(other)
    assert chain_of(one) != chain_of(rec(observed_id="bob"))
    chain = chain_of(reordered)
    assert chain is not None
    assert chain.lock_key() != chain_of(one).lock_key()  # type: ignore[union-attr]
    # The store finds which minds a chain holds, not their order: the writer keeps
    # the versions of this very chain.
    swapped = rec(observed_id="bob", observed_path=["bob", "bob", "carol"])
    assert of_chain(chain, [reordered, swapped]) == [reordered]


@given(st.text(), st.text(), st.text())
def test_a_bounds_lock_is_never_a_chains_nor_a_predecessors(
    kind: str, tenant: str, whose: str
) -> None:
    # Both kinds of lock share one set of keys (writes/locks.py): a chain's key holds a
    # raw NUL between its parts, whatever the names; a bound's never does (JSON escapes
    # it), and it is no bare record id.
    from sidecar.writes.locks import bound_key
    from sidecar.writes.supersession import predecessor_lock_key

    chain = chain_of(rec())
    assert chain is not None
    assert "\x00" in chain.lock_key()
    key = bound_key(kind, tenant, whose)
    assert "\x00" not in key
    assert key.startswith('["bound"')
    assert key != predecessor_lock_key(str(uuid.uuid4()))
