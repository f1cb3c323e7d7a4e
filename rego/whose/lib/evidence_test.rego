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

test_change_record_satisfies if evidence.satisfies({
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
