package whose.lib.evidence_test

import data.whose.lib.evidence

now := "2026-11-30T12:00:00Z"

# Asked about now; the tests at the end ask about other instants.
satisfies(record) if evidence.satisfies(record, now)

test_knower_is_observed_when_present if evidence.knower({"observer_id": "alice", "observed_id": "bob"}) == "bob"

test_knower_is_observer_otherwise if evidence.knower({"observer_id": "alice"}) == "alice"

test_acknowledgement_by_knower_satisfies if satisfies({
	"observer_id": "alice",
	"observed_id": "bob",
	"evidence": [{"kind": "acknowledgement", "by": "bob", "ref": "msg-9"}],
})

test_acknowledgement_by_someone_else_does_not if not satisfies({
	"observer_id": "alice",
	"observed_id": "bob",
	"evidence": [{"kind": "acknowledgement", "by": "alice", "ref": "msg-9"}],
})

test_evidence_without_ref_does_not if not satisfies({
	"observer_id": "alice",
	"evidence": [{"kind": "change_record"}],
})

test_acknowledgement_without_ref_does_not if not satisfies({
	"observer_id": "alice",
	"observed_id": "bob",
	"evidence": [{"kind": "acknowledgement", "by": "bob", "ref": ""}],
})

test_change_record_satisfies_the_holders_own_knowledge if satisfies({
	"observer_id": "alice",
	"evidence": [{"kind": "change_record", "ref": "CR-7"}],
})

test_unaccepted_kind_does_not if not satisfies({
	"observer_id": "alice",
	"evidence": [{"kind": "conversation", "ref": "session-42"}],
})

test_no_evidence_does_not if not satisfies({"observer_id": "alice", "evidence": []})

test_missing_evidence_does_not if not satisfies({"observer_id": "alice"})

test_policy_lives_in_data if satisfies({
	"observer_id": "alice",
	"evidence": [{"kind": "conversation", "ref": "session-42"}],
}) with data.whose.config.evidence as {"accepted_kinds": ["conversation"], "signed_by_knower": []}

# --- someone else's knowledge needs evidence tied to them (docs/design.md §1) ---

# Alice's words relayed with an announcement that never names Bob: Alice's
# belief about Bob, not Bob's knowledge.
alice_thinks_bob_knows(item) := {
	"observer_id": "alice",
	"observed_id": "bob",
	"evidence": [item],
}

test_announcement_not_naming_the_knower_does_not if {
	not satisfies(alice_thinks_bob_knows({"kind": "announcement", "ref": "made-up"}))
}

test_change_record_not_naming_the_knower_does_not if {
	not satisfies(alice_thinks_bob_knows({"kind": "change_record", "ref": "CR-x"}))
}

test_attesting_item_naming_the_holder_does_not if {
	not satisfies(alice_thinks_bob_knows({"kind": "announcement", "ref": "all-hands-1", "by": "alice"}))
}

test_announcement_that_reached_the_knower_satisfies if {
	satisfies(alice_thinks_bob_knows({"kind": "announcement", "ref": "all-hands-1", "by": "bob"}))
}

test_change_record_that_reached_the_knower_satisfies if {
	satisfies(alice_thinks_bob_knows({"kind": "change_record", "ref": "CR-7", "by": "bob"}))
}

test_tied_item_still_needs_a_ref if {
	not satisfies(alice_thinks_bob_knows({"kind": "announcement", "ref": "", "by": "bob"}))
}

test_tied_item_still_needs_an_accepted_kind if {
	not satisfies(alice_thinks_bob_knows({"kind": "document", "ref": "doc-1", "by": "bob"}))
}

test_any_tied_item_among_several_satisfies if satisfies({
	"observer_id": "alice",
	"observed_id": "bob",
	"evidence": [{"kind": "announcement", "ref": "made-up"}, {"kind": "acknowledgement", "ref": "msg-9", "by": "bob"}],
})

test_no_holder_is_nobodys_own_knowledge if {
	not satisfies({"observed_id": "bob", "evidence": [{"kind": "change_record", "ref": "CR-7"}]})
	not satisfies({"evidence": [{"kind": "change_record", "ref": "CR-7"}]})
}

test_own_knowledge if {
	evidence.own_knowledge({"observer_id": "alice"})
	evidence.own_knowledge({"observer_id": "alice", "observed_id": "alice"})
	not evidence.own_knowledge({"observer_id": "alice", "observed_id": "bob"})
	not evidence.own_knowledge({"observed_id": "bob"})
	not evidence.own_knowledge({})
}

test_tied_names_the_knower if {
	evidence.tied({"by": "bob"}, {"observer_id": "alice", "observed_id": "bob"})
	evidence.tied({"by": "alice"}, {"observer_id": "alice"})
	not evidence.tied({"by": "alice"}, {"observer_id": "alice", "observed_id": "bob"})
	not evidence.tied({}, {"observer_id": "alice", "observed_id": "bob"})
}

test_attests if {
	evidence.attests({"kind": "announcement", "ref": "a-1"})
	not evidence.attests({"kind": "acknowledgement", "ref": "msg-9"})
	not evidence.attests({"kind": "document", "ref": "doc-1"})
}

test_which_kinds_attest_lives_in_data if {
	# A team that wants announcements to count only as the knower's own receipt.
	not satisfies({
		"observer_id": "alice",
		"evidence": [{"kind": "announcement", "ref": "a-1"}],
	}) with data.whose.config.evidence as {"accepted_kinds": ["announcement"], "signed_by_knower": ["announcement"]}
}

# --- evidence is asked about an instant: an item dated after it does not count yet ---

acknowledged_at(at) := {
	"observer_id": "alice",
	"observed_id": "bob",
	"evidence": [{"kind": "acknowledgement", "by": "bob", "ref": "msg-9", "at": at}],
}

test_item_dated_before_the_instant_counts if evidence.satisfies(acknowledged_at("2026-10-01T00:00:00Z"), now)

test_item_dated_at_the_instant_counts if evidence.satisfies(acknowledged_at(now), now)

test_item_dated_after_the_instant_does_not if {
	not evidence.satisfies(acknowledged_at("2026-12-01T00:00:00Z"), now)
	not evidence.satisfies(acknowledged_at("2026-10-01T00:00:00Z"), "2026-09-30T23:59:59Z")
}

test_item_dates_compare_as_instants if {
	# 01:00 in Paris is midnight UTC: not after it.
	evidence.satisfies(acknowledged_at("2026-10-01T02:00:00+02:00"), "2026-10-01T00:00:00Z")
	not evidence.satisfies(acknowledged_at("2026-10-01T00:00:01Z"), "2026-10-01T01:00:00+02:00")
}

test_unparseable_item_date_never_counts if {
	not evidence.satisfies(acknowledged_at("yesterday"), now)
	not evidence.satisfies(acknowledged_at(""), now)
	not evidence.satisfies(acknowledged_at(20261001), now)
}

test_undated_item_counts_at_any_instant if {
	undated := {"observer_id": "alice", "evidence": [{"kind": "change_record", "ref": "CR-7"}]}
	evidence.satisfies(undated, "1970-01-01T00:00:00Z")
	evidence.satisfies(undated, now)
}

test_unparseable_instant_counts_only_undated_items if {
	# An unparseable instant: only undated evidence can count.
	not evidence.satisfies(acknowledged_at("2026-10-01T00:00:00Z"), "soon")
	evidence.satisfies({"observer_id": "alice", "evidence": [{"kind": "change_record", "ref": "CR-7"}]}, "soon")
}

test_a_late_item_does_not_hide_an_earlier_one if evidence.satisfies(
	{
		"observer_id": "alice",
		"observed_id": "bob",
		"evidence": [
			{"kind": "acknowledgement", "by": "bob", "ref": "msg-10", "at": "2026-12-01T00:00:00Z"},
			{"kind": "acknowledgement", "by": "bob", "ref": "msg-9", "at": "2026-10-01T00:00:00Z"},
		],
	},
	now,
)

test_existed_at if {
	evidence.existed_at({}, now)
	evidence.existed_at({"at": now}, now)
	not evidence.existed_at({"at": "2026-12-01T00:00:00Z"}, now)
	not evidence.existed_at({"at": "not a time"}, now)
}

test_knower_is_the_innermost_mind_of_a_nested_view if {
	evidence.knower({"observer_id": "alice", "observed_id": "bob", "observed_path": ["bob", "carol"]}) == "carol"
}
