package whose.lib.visibility_test

import data.whose.lib.directory
import data.whose.lib.visibility

bob := {"id": "bob", "tenant": "acme"}

test_visible_to_a_person_named_in_the_audience if {
	visibility.visible_to({"tenant": "acme", "audience": ["bob"]}, bob)
	visibility.why_not({"tenant": "acme", "audience": ["bob"]}, bob) == set()
}

test_visible_to_a_member_of_a_group_in_the_audience if {
	visibility.visible_to({"tenant": "acme", "audience": ["group:launch-team"]}, bob)
	visibility.visible_to({"tenant": "acme", "audience": ["group:ops"]}, object.union(bob, {"groups": ["ops"]}))
}

test_outside_the_audience if {
	record := {"tenant": "acme", "audience": ["alice"]}
	not visibility.visible_to(record, bob)
	visibility.why_not(record, bob) == {"audience_excludes:bob"}
}

test_without_the_scope if {
	record := {"tenant": "acme", "audience": ["bob"], "access_scope": "launch-core"}
	not visibility.visible_to(record, bob)
	visibility.why_not(record, bob) == {"scope_not_cleared:bob"}
}

test_across_tenants if {
	record := {"tenant": "globex", "audience": ["bob"]}
	not visibility.visible_to(record, bob)
	"tenant_mismatch" in visibility.why_not(record, bob)
}

test_without_a_tenant if {
	"tenant_mismatch" in visibility.why_not({"audience": ["bob"]}, bob)
}

test_an_unforeseen_cause_still_says_why if {
	# Someone without a tenant matches no record's tenant, yet trips no named cause.
	record := {"tenant": "acme", "audience": ["x"]}
	not visibility.visible_to(record, {"id": "x"})
	visibility.why_not(record, {"id": "x"}) == {"not_visible:x"}
}

test_a_sight_holds_the_entries_and_scopes_that_admit_the_person if {
	visibility.sight_of(object.union(bob, {"groups": ["ops"], "scopes": ["s"]})) == {
		"entries": {"bob", "group:launch-team", "group:ops"},
		"scopes": {"s"},
	}
	visibility.sight_of({"id": "x"}) == {"entries": {"x"}, "scopes": set()}
}

test_admitted_and_cleared_with_a_sight if {
	sight := visibility.sight_of(object.union(bob, {"scopes": ["s"]}))
	visibility.admitted({"audience": ["x", "bob"]}, sight)
	not visibility.admitted({"audience": ["launch-team"]}, sight)
	visibility.cleared({}, sight)
	not visibility.cleared({"access_scope": "launch-core"}, sight)
}

# visible_to says what the directory's admits and clears_scope say (which the write
# policy and policy extensions use), for every person and record of a small grid.
test_visible_to_agrees_with_the_directory if {
	people := [
		bob, {"id": "alice", "tenant": "acme"}, {"id": "alice", "tenant": "globex"},
		{"id": "dave", "tenant": "acme", "groups": ["ops"], "scopes": ["launch-core"]},
		{"id": "x"},
	]
	records := [{"tenant": tenant, "audience": audience} |
		some tenant in ["acme", "globex"]
		some audience in [[], ["bob"], ["alice", "group:ops"], ["group:launch-team"], ["launch-team"]]
	]
	scoped := [object.union(r, {"access_scope": "launch-core"}) | some r in records]
	every person in people {
		every record in array.concat(records, scoped) {
			visible(record, person) == by_directory(record, person)
		}
	}
}

by_directory(record, person) if {
	record.tenant == person.tenant
	directory.admits(record, person)
	directory.clears_scope(record, person)
} else := false

visible(record, person) if visibility.visible_to(record, person)

else := false

test_unseen_because_names_the_causes_or_says_not_visible if {
	visibility.unseen_because({"tenant": "acme", "audience": ["alice"]}, bob) == {"audience_excludes:bob"}
	visibility.unseen_because({"tenant": "acme", "audience": ["x"]}, {"id": "x"}) == {"not_visible:x"}
}
