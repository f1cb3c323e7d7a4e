package whose.trust_test

import data.whose.trust

claim := {
	"teller": {"id": "narrator", "tenant": "acme"},
	"hearers": [
		{"id": "anne", "evidence_at": "2026-03-01T10:00:00Z"},
		{"id": "sally"},
	],
	"key": "marble.location",
	"hedged": false,
	"about": [],
	"said_at": "2026-03-01T10:10:00Z",
	"teller_evidence_at": "2026-03-01T10:05:00Z",
}

directory := {"tenants": {"acme": {
	"principals": {"narrator": {"roles": ["authority"], "scopes": []}},
	"groups": {},
}}}

relay := {"id": "extractor-bot", "tenant": "acme", "roles": ["extractor"]}

adopted(c, settings) := result if {
	result := trust.adoptions with input as {"writer": relay, "claims": [c]}
		with data.whose.config.trust as settings
		with data.whose.directory as directory
}

test_by_default_nobody_adopts if {
	trust.adoptions == [[]] with input as {"writer": relay, "claims": [claim]}
		with data.whose.directory as directory
}

test_nothing_switched_on_adopts_nothing if adopted(claim, {}) == [[]]

test_adopt_from_an_authority if {
	adopted(claim, {"adopt_from_roles": ["authority"]}) == [["anne", "sally"]]
}

test_a_teller_without_the_role_is_not_adopted_from if {
	adopted(object.union(claim, {"teller": {"id": "anne", "tenant": "acme"}}), {"adopt_from_roles": ["authority"]}) == [[]]
}

test_a_role_from_another_tenants_directory_does_not_count if {
	adopted(object.union(claim, {"teller": {"id": "narrator", "tenant": "globex"}}), {"adopt_from_roles": ["authority"]}) == [[]]
}

test_adopt_from_more_recent_evidence if {
	# The teller saw the key at 10:05; anne last at 10:00, sally never.
	adopted(claim, {"adopt_more_recent_evidence": true}) == [["anne", "sally"]]
}

test_not_from_older_or_equal_evidence if {
	older := object.union(claim, {"teller_evidence_at": "2026-03-01T10:00:00Z"})
	adopted(older, {"adopt_more_recent_evidence": true}) == [["sally"]]
}

test_not_from_a_teller_who_never_saw_it if {
	unseen := object.remove(claim, ["teller_evidence_at"])
	adopted(unseen, {"adopt_more_recent_evidence": true}) == [[]]
}

test_switched_off_explicitly if {
	adopted(claim, {"adopt_more_recent_evidence": false, "adopt_from_roles": []}) == [[]]
}

test_claims_answer_in_order if {
	second := object.union(claim, {"hearers": [{"id": "carol"}]})
	trust.adoptions == [["anne", "sally"], ["carol"]] with input as {"writer": relay, "claims": [claim, second]}
		with data.whose.config.trust as {"adopt_from_roles": ["authority"]}
		with data.whose.directory as directory
}

test_only_a_relay_or_the_hearer_records_an_adopted_belief if {
	# anne writes the narrator's claim down: only her own belief may follow from it.
	result := trust.adoptions with input as {"writer": {"id": "anne", "tenant": "acme"}, "claims": [claim]}
		with data.whose.config.trust as {"adopt_from_roles": ["authority"]}
		with data.whose.directory as directory
	result == [["anne"]]
}

# --- believe_told: believe what you are told unless you saw it then ---------------------

test_believe_told_adopts_from_anyone if {
	# Anne saw the key before she was told; Sally never did: both believe the teller.
	adopted(claim, {"believe_told": true}) == [["anne", "sally"]]
}

test_believe_told_not_when_hedged if {
	adopted(object.union(claim, {"hedged": true}), {"believe_told": true}) == [[]]
}

test_believe_told_not_when_the_hearer_saw_it_then if {
	seen := object.union(claim, {"hearers": [
		{"id": "anne", "evidence_at": "2026-03-01T10:10:00Z"},
		{"id": "sally", "evidence_at": "2026-03-01T10:09:59Z"},
	]})
	adopted(seen, {"believe_told": true}) == [["sally"]]
}

test_believe_told_only_for_a_writer_who_records_for_the_hearer if {
	stranger := {"id": "mallory", "tenant": "acme", "roles": []}
	result := trust.adoptions with input as {"writer": stranger, "claims": [claim]}
		with data.whose.config.trust as {"believe_told": true}
		with data.whose.directory as directory
	result == [[]]
}

test_believe_told_switched_off if adopted(claim, {"believe_told": false}) == [[]]
