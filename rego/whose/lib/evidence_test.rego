package whose.lib.evidence_test

import data.whose.lib.evidence

test_knower_is_observed_when_present if evidence.knower({"observer_id": "alice", "observed_id": "bob"}) == "bob"

test_knower_is_observer_otherwise if evidence.knower({"observer_id": "alice"}) == "alice"

test_acknowledgement_by_knower_satisfies if evidence.satisfies({
	"observer_id": "alice",
	"observed_id": "bob",
	"evidence": [{"kind": "acknowledgement", "by": "bob", "ref": "msg-9"}],
})

test_acknowledgement_by_someone_else_does_not if not evidence.satisfies({
	"observer_id": "alice",
	"observed_id": "bob",
	"evidence": [{"kind": "acknowledgement", "by": "alice", "ref": "msg-9"}],
})

test_evidence_without_ref_does_not if not evidence.satisfies({
	"observer_id": "alice",
	"evidence": [{"kind": "change_record"}],
})

test_acknowledgement_without_ref_does_not if not evidence.satisfies({
	"observer_id": "alice",
	"observed_id": "bob",
	"evidence": [{"kind": "acknowledgement", "by": "bob", "ref": ""}],
})

test_change_record_satisfies_the_holders_own_knowledge if evidence.satisfies({
	"observer_id": "alice",
	"evidence": [{"kind": "change_record", "ref": "CR-7"}],
})

test_unaccepted_kind_does_not if not evidence.satisfies({
	"observer_id": "alice",
	"evidence": [{"kind": "conversation", "ref": "session-42"}],
})

test_no_evidence_does_not if not evidence.satisfies({"observer_id": "alice", "evidence": []})

test_missing_evidence_does_not if not evidence.satisfies({"observer_id": "alice"})

test_policy_lives_in_data if evidence.satisfies({
	"observer_id": "alice",
	"evidence": [{"kind": "conversation", "ref": "session-42"}],
}) with data.whose.config.evidence as {"accepted_kinds": ["conversation"], "signed_by_knower": []}

# --- someone else's knowledge needs evidence tied to them (DESIGN §1) ---

# Alice's words relayed with an announcement that never names Bob: Alice's
# belief about Bob, not Bob's knowledge.
alice_thinks_bob_knows(item) := {
	"observer_id": "alice",
	"observed_id": "bob",
	"evidence": [item],
}

test_announcement_not_naming_the_knower_does_not if {
	not evidence.satisfies(alice_thinks_bob_knows({"kind": "announcement", "ref": "made-up"}))
}

test_change_record_not_naming_the_knower_does_not if {
	not evidence.satisfies(alice_thinks_bob_knows({"kind": "change_record", "ref": "CR-x"}))
}

test_attesting_item_naming_the_holder_does_not if {
	not evidence.satisfies(alice_thinks_bob_knows({"kind": "announcement", "ref": "all-hands-1", "by": "alice"}))
}

test_announcement_that_reached_the_knower_satisfies if {
	evidence.satisfies(alice_thinks_bob_knows({"kind": "announcement", "ref": "all-hands-1", "by": "bob"}))
}

test_change_record_that_reached_the_knower_satisfies if {
	evidence.satisfies(alice_thinks_bob_knows({"kind": "change_record", "ref": "CR-7", "by": "bob"}))
}

test_tied_item_still_needs_a_ref if {
	not evidence.satisfies(alice_thinks_bob_knows({"kind": "announcement", "ref": "", "by": "bob"}))
}

test_tied_item_still_needs_an_accepted_kind if {
	not evidence.satisfies(alice_thinks_bob_knows({"kind": "document", "ref": "doc-1", "by": "bob"}))
}

test_any_tied_item_among_several_satisfies if evidence.satisfies({
	"observer_id": "alice",
	"observed_id": "bob",
	"evidence": [{"kind": "announcement", "ref": "made-up"}, {"kind": "acknowledgement", "ref": "msg-9", "by": "bob"}],
})

test_no_holder_is_nobodys_own_knowledge if {
	not evidence.satisfies({"observed_id": "bob", "evidence": [{"kind": "change_record", "ref": "CR-7"}]})
	not evidence.satisfies({"evidence": [{"kind": "change_record", "ref": "CR-7"}]})
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
	not evidence.satisfies({
		"observer_id": "alice",
		"evidence": [{"kind": "announcement", "ref": "a-1"}],
	}) with data.whose.config.evidence as {"accepted_kinds": ["announcement"], "signed_by_knower": ["announcement"]}
}
