package whose.pushdown_test

import data.whose.disclosure
import data.whose.pushdown

now := "2026-11-30T12:00:00Z"

askers := [
	{"id": "alice", "tenant": "acme"},
	{"id": "bob", "tenant": "acme"},
	{"id": "carol", "tenant": "acme", "groups": ["ops"]},
	{"id": "dave", "tenant": "acme", "scopes": ["launch-core"], "groups": ["launch-team"]},
]

audiences := [[], ["bob"], ["carol", "alice"]]

records := [object.union(base, extra) |
	base := {
		"id": "r", "tenant": "acme", "observer_id": "alice", "modality": "believed",
		"source_id": "s", "valid_at": "2026-10-01T00:00:00Z",
	}
	some extra in [
		{"audience": ["alice"]},
		{"audience": ["bob", "carol"]},
		{"audience": ["group:launch-team"]},
		{"audience": ["group:ops"]},
		{"audience": ["group:launch-team"], "access_scope": "launch-core"},
		{"audience": ["alice", "group:ops"], "access_scope": "launch-core"},
		{"audience": []},
	]
]

cases := [[asker, audience, record] |
	some asker in askers
	some audience in audiences
	some record in records
]

question(asker, audience, record) := {"asker": asker, "audience": audience, "purpose": "recall", "now": now, "record": record}

allowed := [c |
	some c in cases
	disclosure.single.allow with input as question(c[0], c[1], c[2])
]

dropped := [c |
	some c in allowed
	not pushdown.admits(c[2]) with input as question(c[0], c[1], c[2])
]

# The property that makes pushdown safe to apply: it never drops a record the
# disclosure policy would allow.
test_pushdown_admits_every_record_disclosure_allows if {
	count(allowed) > 10 # the sample exercises both outcomes ...
	count(allowed) < count(cases)
	dropped == [] # ... and nothing allowed is dropped
}

test_entries_cover_name_directory_groups_and_token_groups if {
	c := pushdown.constraints with input as {"asker": {"id": "carol", "tenant": "acme", "groups": ["ops"]}}
	c.audience_any_of == [{"carol", "group:launch-team", "group:ops"}]
}

test_every_audience_member_constrains if {
	c := pushdown.constraints with input as {"asker": {"id": "alice", "tenant": "acme"}, "audience": ["bob"]}
	{"alice", "group:launch-team"} in c.audience_any_of
	{"bob", "group:launch-team"} in c.audience_any_of
}

test_scopes_are_those_every_member_holds if {
	both := pushdown.constraints with input as {"asker": {"id": "alice", "tenant": "acme"}, "audience": ["carol"]}
	both.scopes == {"launch-core"}
	with_bob := pushdown.constraints with input as {"asker": {"id": "alice", "tenant": "acme"}, "audience": ["bob"]}
	with_bob.scopes == set()
}

test_admits_unscoped_record_in_audience if {
	pushdown.admits({"audience": ["group:launch-team"]}) with input as {"asker": {"id": "bob", "tenant": "acme"}}
}

test_does_not_admit_record_outside_audience if {
	not pushdown.admits({"audience": ["alice"]}) with input as {"asker": {"id": "bob", "tenant": "acme"}}
}

test_does_not_admit_scope_not_held if {
	record := {"audience": ["group:launch-team"], "access_scope": "launch-core"}
	not pushdown.admits(record) with input as {"asker": {"id": "bob", "tenant": "acme"}}
}
