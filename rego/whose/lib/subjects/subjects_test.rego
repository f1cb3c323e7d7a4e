package whose.lib.subjects_test

import data.whose.lib.subjects

record := {
	"id": "r1",
	"tenant": "acme",
	"observer_id": "alice",
	"observed_id": "bob",
	"source": {"kind": "conversation", "speaker": "alice"},
	"provenance": {"writer": "relay"},
}

fact := {"id": "r2", "tenant": "acme", "provenance": {"writer": "narrator"}}

test_people_are_holder_observed_and_speaker if subjects.people(record) == {"alice", "bob"}

test_holder_is_the_observer if subjects.holder(record) == "alice"

test_holder_of_a_claim_without_observer_is_its_speaker if {
	subjects.holder(json.remove(record, ["observer_id"])) == "alice"
}

test_a_fact_without_speaker_is_its_writers if {
	subjects.holder(fact) == "narrator"
	subjects.people(fact) == {"narrator"}
}

test_concerns_the_observed_mind if subjects.concerns(record, "bob")

test_does_not_concern_the_relay_or_others if {
	not subjects.concerns(record, "relay")
	not subjects.concerns(record, "carol")
}

holds := {"tenants": {"acme": {"records": ["r9"], "subjects": ["bob"]}}}

test_held_by_id if subjects.held({"id": "r9", "tenant": "acme"}) with data.whose.holds as holds

test_held_by_subject if subjects.held(record) with data.whose.holds as holds

test_not_held_in_another_tenant if not subjects.held(object.union(record, {"tenant": "globex"})) with data.whose.holds as holds

test_not_held_without_holds if not subjects.held(record) with data.whose.holds as {"tenants": {}}
