"""The reference model's own rules, on the cases that reviews found wrong.

Pure and fast (no sidecar): the leak oracle then holds the running policy to these.
"""

from __future__ import annotations

from dataclasses import replace

from tests.oracle.reference import (
    Config,
    Model,
    Person,
    Record,
    TenantDirectory,
    at,
    cascade,
    implied_paths,
    implied_view,
    implies,
    line,
    note_changes,
    status,
    superseded_in_mind,
)

TENANT = "t"
DIRECTORY = TenantDirectory(groups={"team": {"alice", "bob"}, "empty": set()})
MODEL = Model({TENANT: DIRECTORY}, Config.load())


def known(**fields: object) -> Record:
    """Alice's record that Bob knows p, as the extractor relayed it from Alice's words."""
    record: Record = {
        "tenant": TENANT,
        "observer_id": "alice",
        "observed_id": "bob",
        "modality": "known",
        "source": {"kind": "conversation", "speaker": "alice", "channel": "dm"},
        "audience": ["alice"],
        "valid_at": "2026-10-01T00:00:00Z",
    }
    return record | fields


def test_someone_elses_knowledge_needs_evidence_naming_them() -> None:
    now = at("2026-11-30T00:00:00Z")
    for kind in ("announcement", "change_record", "acknowledgement"):
        untied = known(evidence=[{"kind": kind, "ref": "made-up"}])
        assert MODEL.usable_as(untied, now) == "nested_belief", kind
        by_holder = known(evidence=[{"kind": kind, "ref": "r-1", "by": "alice"}])
        assert MODEL.usable_as(by_holder, now) == "nested_belief", kind
        tied = known(evidence=[{"kind": kind, "ref": "r-1", "by": "bob"}])
        assert MODEL.usable_as(tied, now) == "knowledge", kind


def test_the_holders_own_knowledge_may_rest_on_a_change_record() -> None:
    now = at("2026-11-30T00:00:00Z")
    own = known(evidence=[{"kind": "change_record", "ref": "CR-7"}])
    del own["observed_id"]
    assert MODEL.usable_as(own, now) == "knowledge"
    # ... but not on someone else's acknowledgement.
    acked = own | {"evidence": [{"kind": "acknowledgement", "ref": "m-1", "by": "bob"}]}
    assert MODEL.usable_as(acked, now) == "belief"


def test_common_knowledge_is_of_groups_the_directory_defines() -> None:
    now = at("2026-11-30T00:00:00Z")
    announced: Record = {
        "tenant": TENANT,
        "observer_id": "carol",
        "modality": "common_knowledge",
        "source": {"kind": "announcement", "speaker": "carol", "channel": "all-hands"},
        "valid_at": "2026-10-01T00:00:00Z",
    }
    for audience, use in [
        (["group:team"], "common_knowledge"),
        (["dave", "group:empty"], "common_knowledge"),
        (["alice", "group:nosuchgroup"], "belief"),
        (["group:team", "group:nosuchgroup"], "belief"),
        (["alice", "bob"], "belief"),
    ]:
        assert MODEL.usable_as(announced | {"audience": audience}, now) == use, audience
    elsewhere = announced | {"tenant": "other", "audience": ["group:team"]}
    assert MODEL.usable_as(elsewhere, now) == "belief"


def test_a_fact_is_a_fact_at_the_instant_asked_about() -> None:
    superseded: Record = {
        "tenant": TENANT,
        "modality": "world_state",
        "source": {"kind": "change_record"},
        "valid_at": "2026-10-01T00:00:00Z",
        "invalid_at": "2026-10-10T00:00:00Z",
    }
    assert MODEL.usable_as(superseded, at("2026-10-05T00:00:00Z")) == "fact"
    assert MODEL.usable_as(superseded, at("2026-10-20T00:00:00Z")) == "unverified_claim"
    assert MODEL.usable_as(superseded, at("2026-09-01T00:00:00Z")) == "unverified_claim"
    rumour = superseded | {"source": {"kind": "conversation"}}
    assert MODEL.usable_as(rumour, at("2026-10-05T00:00:00Z")) == "unverified_claim"


def test_a_claim_about_someones_mind_is_never_a_shared_claim() -> None:
    now = at("2026-11-30T00:00:00Z")
    announced: Record = {
        "tenant": TENANT,
        "observer_id": "alice",
        "observed_id": "bob",
        "observed_attitude": "believes",
        "modality": "common_knowledge",
        "source": {"kind": "announcement", "speaker": "alice", "channel": "all-hands"},
        "audience": ["group:team"],
        "valid_at": "2026-10-01T00:00:00Z",
    }
    assert MODEL.usable_as(announced, now) == "nested_belief"
    fact = announced | {"modality": "world_state", "source": {"kind": "change_record"}}
    assert MODEL.usable_as(fact, now) == "nested_belief"
    rumour = fact | {"source": {"kind": "conversation"}}
    assert MODEL.usable_as(rumour, now) == "nested_belief"
    # "Bob knows p" with Bob's own acknowledgement stays knowledge.
    acked = known(evidence=[{"kind": "acknowledgement", "ref": "m-1", "by": "bob"}])
    assert MODEL.usable_as(acked, now) == "knowledge"


def test_evidence_counts_from_its_date_on() -> None:
    def acked(when: object) -> Record:
        return known(evidence=[{"kind": "acknowledgement", "ref": "m-1", "by": "bob", "at": when}])

    oct_20 = acked("2026-10-20T00:00:00Z")
    assert MODEL.usable_as(oct_20, at("2026-10-10T00:00:00Z")) == "nested_belief"
    assert MODEL.usable_as(oct_20, at("2026-10-20T00:00:00Z")) == "knowledge"
    assert MODEL.usable_as(oct_20, at("2026-11-30T00:00:00Z")) == "knowledge"
    for unreadable in ("soon", "", 20261020):
        assert MODEL.usable_as(acked(unreadable), at("2026-11-30T00:00:00Z")) == "nested_belief"


# --- minds (issue 26) ---------------------------------------------------------------


def perception(holder: str, there: list[str], **fields: object) -> Record:
    record: Record = {
        "id": f"{holder}-saw",
        "tenant": TENANT,
        "observer_id": holder,
        "modality": "observed",
        "source": {"kind": "perception", "participants": there},
        "provenance": {"method": "witnessed"},
        "proposition": {"key": "marble"},
        "audience": [holder],
        "valid_at": "2026-03-01T10:00:00Z",
    }
    return record | fields


def test_a_perception_implies_views_of_everyone_seen_there_to_any_depth() -> None:
    anne = perception("anne", ["anne", "sally"])
    assert implies(anne, "anne", ("sally",), heard=False)
    assert implies(anne, "anne", ("sally", "anne", "sally", "anne"), heard=False)
    assert not implies(anne, "anne", ("sally", "sally"), heard=False)  # nobody twice in a row
    assert not implies(anne, "anne", ("carol",), heard=False)  # carol was not there
    assert not implies(anne, "sally", ("anne",), heard=False)  # only its holder's views
    assert implied_paths(anne, 2) == {
        ("anne", ("sally",), False),
        ("anne", ("sally", "anne"), False),
    }


def test_nobody_saw_an_unnoticed_holder_see_it() -> None:
    sally = perception(
        "sally",
        ["anne", "sally"],
        source={"kind": "perception", "participants": ["anne", "sally"], "unnoticed": ["sally"]},
    )
    assert implies(sally, "sally", ("anne",), heard=False)
    assert not implies(sally, "sally", ("anne", "sally"), heard=False)


def test_a_statement_implies_what_its_hearers_heard_and_think() -> None:
    said: Record = {
        "id": "s",
        "observer_id": "alice",
        "act": "said",
        "source": {
            "kind": "conversation",
            "speaker": "alice",
            "participants": ["alice", "bob", "carol"],
        },
    }
    assert implies(said, "bob", ("alice",), heard=True)
    assert implies(said, "bob", ("alice",), heard=False)
    assert implies(said, "carol", ("bob", "alice"), heard=False)
    # Carol thinks Bob heard Alice say it (issue 40); a chain of hearers never names the
    # speaker, and nobody heard themselves.
    assert implies(said, "carol", ("bob", "alice"), heard=True)
    assert not implies(said, "carol", ("alice", "bob", "alice"), heard=True)
    assert not implies(said, "carol", ("alice", "alice"), heard=True)
    assert not implies(said, "dave", ("alice",), heard=False)  # dave was not there
    assert not implies(said, "alice", ("alice",), heard=False)
    view = implied_view(said | {"valid_at": "2026-01-01T00:00:00Z"}, "bob", ("alice",), True)
    assert MODEL.usable_as(view, at("2026-02-01T00:00:00Z")) == "heard"
    assert (
        MODEL.usable_as(said | {"modality": "asserted"}, at("2026-02-01T00:00:00Z")) == "statement"
    )


def test_one_current_view_per_mind_among_what_may_be_shown() -> None:
    told = {
        "id": "a",
        "observer_id": "alice",
        "proposition": {"key": "k"},
        "valid_at": "2026-01-01T00:00:00Z",
    }
    saw = told | {"id": "b", "valid_at": "2026-02-01T00:00:00Z"}
    later = at("2026-03-01T00:00:00Z")
    assert superseded_in_mind(told, [told, saw], later)
    assert not superseded_in_mind(saw, [told, saw], later)
    assert not superseded_in_mind(told, [told], later)  # what bob may see: still current
    assert not superseded_in_mind(told, [told, saw], at("2026-01-15T00:00:00Z"))
    heard = saw | {"act": "heard", "observed_id": "bob"}
    assert line(heard) != line(saw)


def summaries(*derived_from: tuple[str, str]) -> dict[str, Record]:
    """Records by id, each (id, premise id or "") derived from its premise."""
    records: dict[str, Record] = {}
    for record_id, premise in derived_from:
        record: Record = {"id": record_id, "tenant": TENANT, "audience": ["alice"]}
        record["valid_at"] = "2026-01-01T00:00:00Z"
        if premise:
            record["provenance"] = {"derived_from": [premise]}
        records[record_id] = record
    return records


ERASED_AT = at("2026-06-01T00:00:00Z")


def test_an_erased_premise_is_noted_on_down_and_stale_from_then_on() -> None:
    records = summaries(("p", ""), ("d", "p"), ("dd", "d"), ("other", ""))
    assert note_changes(records, {"p": "erased"}, ERASED_AT, skip={"p"}) == 2
    assert [c["change"] for c in records["d"]["premise_changes"]] == ["erased"]
    assert [c["change"] for c in records["dd"]["premise_changes"]] == ["stale"]
    assert "premise_changes" not in records["other"]
    assert status(records["d"], at("2026-05-01T00:00:00Z")) == "current"
    assert status(records["d"], ERASED_AT) == "stale"
    # A note it has already is not news: nothing passes on.
    assert note_changes(records, {"p": "erased"}, ERASED_AT, skip={"p"}) == 0
    withholding = Model({TENANT: DIRECTORY}, replace(Config.load(), withhold=frozenset({"stale"})))
    assert not withholding.withheld(records["d"])
    assert withholding.withheld(records["dd"])
    asker = Person("alice", TENANT)
    assert not withholding.allows(records["dd"], asker, purpose="get", now=ERASED_AT)
    assert MODEL.allows(records["dd"], asker, purpose="get", now=ERASED_AT)


def test_a_withdrawn_derivation_ends_then_and_what_follows_is_noted_withdrawn() -> None:
    records = summaries(("p", ""), ("d", "p"), ("dd", "d"))
    records["later"] = records["d"] | {"id": "later", "valid_at": "2100-01-01T00:00:00Z"}
    note_changes(records, {"p": "erased"}, ERASED_AT, withdraw={"p"}, skip={"p"})
    assert records["d"]["invalid_at"] == "2026-06-01T00:00:00Z"
    assert status(records["d"], ERASED_AT) == "superseded"
    # Ended at its start when that is later: never valid.
    assert records["later"]["invalid_at"] == "2100-01-01T00:00:00Z"
    assert [c["change"] for c in records["dd"]["premise_changes"]] == ["withdrawn"]
    assert "invalid_at" not in records["dd"]


def test_erase_takes_every_derivation_down_the_line_and_nothing_else() -> None:
    records = summaries(("p", ""), ("d", "p"), ("dd", "d"), ("ddd", "dd"), ("q", ""))
    assert cascade(records, {"p"}) == {"d", "dd", "ddd"}
    assert cascade(records, {"dd"}) == {"ddd"}
    assert cascade(records, {"q"}) == set()
