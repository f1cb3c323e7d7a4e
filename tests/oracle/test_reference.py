"""The reference model's own rules, on the cases that reviews found wrong.

Pure and fast (no sidecar): the leak oracle then holds the running policy to these.
"""

from __future__ import annotations

from tests.oracle.reference import Config, Model, Record, TenantDirectory, at

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
