package whose.consent_test

import data.whose.consent

settings := {"consent": {"categories": ["appointments", "clinical"], "act_for_roles": ["data_protection"]}}

directory := {"tenants": {"acme": {"principals": {"dpo": {"roles": ["data_protection"], "scopes": []}}, "groups": {}}}}

asking(who, action, grant) := {
	"asker": {"id": who, "tenant": "acme"},
	"action": action,
	"grant": grant,
	"now": "2026-12-06T09:00:00Z",
}

sister := {"subject": "alice", "reader": "beth", "categories": ["appointments"], "until": "2026-12-11T23:59:59Z"}

decided(question) := answer if {
	answer := consent.decision with input as question
		with data.whose.config as settings
		with data.whose.directory as directory
}

test_the_subject_grants_and_revokes if {
	decided(asking("alice", "grant", sister)) == {"allow": true, "reasons": []}
	decided(asking("alice", "revoke", sister)) == {"allow": true, "reasons": []}
}

test_an_agent_by_role_acts_for_the_subject if {
	decided(asking("dpo", "grant", sister)).allow
	decided(asking("dpo", "revoke", sister)).allow
}

test_someone_else_may_neither_grant_nor_revoke if {
	decided(asking("beth", "grant", sister)).reasons == ["not_subject_or_agent"]
	decided(asking("beth", "revoke", sister)).reasons == ["not_subject_or_agent"]
}

test_token_roles_count_for_acting if {
	consent.decision.allow with input as object.union(asking("carol", "grant", sister), {"asker": {"id": "carol", "tenant": "acme", "roles": ["data_protection"]}})
		with data.whose.config as settings
		with data.whose.directory as directory
}

test_categories_are_named_and_known if {
	decided(asking("alice", "grant", object.union(sister, {"categories": []}))).reasons == ["no_categories"]
	decided(asking("alice", "grant", object.union(sister, {"categories": ["pin", "appointments"]}))).reasons == ["unknown_category:pin"]
}

test_a_reader_other_than_the_subject if {
	decided(asking("alice", "grant", object.union(sister, {"reader": "alice"}))).reasons == ["reader_is_subject"]
}

test_an_end_after_now_or_none if {
	decided(asking("alice", "grant", object.remove(sister, ["until"]))).allow
	decided(asking("alice", "grant", object.union(sister, {"until": "2026-12-06T09:00:00Z"}))).reasons == ["ends_before_now"]
	decided(asking("alice", "grant", object.union(sister, {"until": "Friday"}))).reasons == ["ends_before_now"]
}

test_revoking_checks_only_who_acts if {
	decided(asking("alice", "revoke", object.union(sister, {"categories": ["pin"], "until": "2000-01-01T00:00:00Z"}))).allow
}

test_unknown_actions_and_askers_are_refused if {
	decided(asking("alice", "extend", sister)).reasons == ["unknown_action"]
	"no_asker" in consent.decision.reasons with input as json.remove(asking("alice", "grant", sister), ["asker/tenant"])
		with data.whose.config as settings
		with data.whose.directory as directory
}

test_without_act_for_roles_only_the_subject_acts if {
	consent.decision.reasons == ["not_subject_or_agent"] with input as asking("dpo", "grant", sister)
		with data.whose.config as {"consent": {"categories": ["appointments"]}}
		with data.whose.directory as directory
}
