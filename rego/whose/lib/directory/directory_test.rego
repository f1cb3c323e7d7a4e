package whose.lib.directory_test

import data.whose.lib.directory

alice := {"id": "alice", "tenant": "acme"}

bob := {"id": "bob", "tenant": "acme"}

test_member_of_by_directory if directory.member_of(bob, "launch-team")

test_member_of_by_token_claim if directory.member_of({"id": "dave", "tenant": "acme", "groups": ["ops"]}, "ops")

test_not_member_of_unknown_group if not directory.member_of(alice, "board")

test_not_member_of_other_tenants_group if not directory.member_of({"id": "alice", "tenant": "globex"}, "launch-team")

test_defines_group_from_the_directory if directory.defines_group("acme", "launch-team")

test_token_group_is_not_defined if not directory.defines_group("acme", "ops")

test_other_tenants_group_is_not_defined if not directory.defines_group("globex", "launch-team")

test_unknown_tenant_defines_no_group if not directory.defines_group("nosuchtenant", "launch-team")

test_cleared_for_by_directory if directory.cleared_for(alice, "launch-core")

test_cleared_for_by_token_claim if directory.cleared_for({"id": "bob", "tenant": "acme", "scopes": ["launch-core"]}, "launch-core")

test_not_cleared_for if not directory.cleared_for(bob, "launch-core")

test_has_role_by_directory if directory.has_role({"id": "release-bot", "tenant": "acme"}, "authority")

test_has_role_by_token_claim if directory.has_role({"id": "dave", "tenant": "acme", "roles": ["authority"]}, "authority")

test_not_has_role if not directory.has_role(alice, "authority")

test_admits_by_name if directory.admits({"tenant": "acme", "audience": ["alice"]}, alice)

test_admits_by_group if directory.admits({"tenant": "acme", "audience": ["group:launch-team"]}, bob)

test_not_admits_outsider if not directory.admits({"tenant": "acme", "audience": ["alice"]}, bob)

test_not_admits_empty_audience if not directory.admits({"tenant": "acme", "audience": []}, alice)

test_not_admits_bare_group_name if not directory.admits({"tenant": "acme", "audience": ["launch-team"]}, bob)

test_clears_unscoped_record if directory.clears_scope({"tenant": "acme"}, bob)

test_clears_scope_when_cleared if directory.clears_scope({"tenant": "acme", "access_scope": "launch-core"}, alice)

test_not_clears_scope_when_not_cleared if not directory.clears_scope({"tenant": "acme", "access_scope": "launch-core"}, bob)

test_members_of_a_group if {
	directory.members_of("acme", "launch-team") == ["alice", "bob", "carol"]
	directory.members_of("acme", "nosuchgroup") == []
	directory.members_of("nosuchtenant", "launch-team") == []
}

test_groups_of_the_directory_and_the_token if {
	directory.groups_of(bob) == {"launch-team"}
	directory.groups_of(object.union(bob, {"groups": ["ops"]})) == {"launch-team", "ops"}
	directory.groups_of({"id": "dave", "tenant": "acme"}) == set()
	directory.groups_of({"id": "alice", "tenant": "globex"}) == set()
}

test_clearances_of_the_directory_and_the_token if {
	directory.clearances_of(alice) == {"launch-core"}
	directory.clearances_of(object.union(bob, {"scopes": ["ops-core"]})) == {"ops-core"}
	directory.clearances_of(bob) == set()
	directory.clearances_of({"id": "nobody", "tenant": "acme"}) == set()
}

# groups_of and clearances_of say what member_of and cleared_for say, name by name.
test_groups_of_and_clearances_of_agree_with_member_of_and_cleared_for if {
	people := [
		alice, bob, {"id": "alice", "tenant": "globex"}, {"id": "x"},
		{"id": "dave", "tenant": "acme", "groups": ["ops", "launch-team"], "scopes": ["s"]},
	]
	every person in people {
		every name in ["launch-team", "ops", "board"] {
			member(person, name) == in_set(name, directory.groups_of(person))
		}
		every scope in ["launch-core", "s", "t"] {
			cleared(person, scope) == in_set(scope, directory.clearances_of(person))
		}
	}
}

member(person, name) if directory.member_of(person, name)

else := false

cleared(person, scope) if directory.cleared_for(person, scope)

else := false

in_set(x, s) := x in s
