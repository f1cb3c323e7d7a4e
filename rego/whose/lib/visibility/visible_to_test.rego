package whose.lib.visibility_test

import data.whose.disclosure
import data.whose.lib.visibility

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
	some member in disclosure.members with input as question(c[0], c[1], c[2])
	not visibility.visible_to(c[2], member)
]

# The property that makes pushdown safe to apply: it never drops a record the
# disclosure policy would allow.
test_visible_to_holds_for_every_record_disclosure_allows if {
	count(allowed) > 10 # the sample exercises both outcomes ...
	count(allowed) < count(cases)
	dropped == [] # ... and nothing allowed is dropped
}

# And the converse: a record every hearer may see is denied only for time or for
# the question itself (asker, purpose), never for anything the store filter misses.
seen_but_denied := [[c, reasons] |
	some c in cases
	hearers := disclosure.members with input as question(c[0], c[1], c[2])
	every member in hearers {
		visibility.visible_to(c[2], member)
	}
	d := disclosure.single with input as question(c[0], c[1], c[2])
	not d.allow
	reasons := d.reasons
]

test_a_record_every_hearer_may_see_is_allowed if {
	count(allowed) > 0
	seen_but_denied == []
}
