package whose.lib.visibility_test

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
