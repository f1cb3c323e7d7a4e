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

test_people_named_in_every_place if subjects.people(record) == {"alice", "bob", "relay"}

test_people_of_a_bare_record_is_empty if count(subjects.people({"id": "r2"})) == 0

test_concerns_the_observed_mind if subjects.concerns(record, "bob")

test_does_not_concern_others if not subjects.concerns(record, "carol")

holds := {"tenants": {"acme": {"records": ["r9"], "subjects": ["bob"]}}}

test_held_by_id if subjects.held({"id": "r9", "tenant": "acme"}) with data.whose.holds as holds

test_held_by_subject if subjects.held(record) with data.whose.holds as holds

test_not_held_in_another_tenant if not subjects.held(object.union(record, {"tenant": "globex"})) with data.whose.holds as holds

test_not_held_without_holds if not subjects.held(record) with data.whose.holds as {"tenants": {}}
