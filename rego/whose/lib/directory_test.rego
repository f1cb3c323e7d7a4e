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
