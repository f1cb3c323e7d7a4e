package whose.collections_test

import data.whose.collections

alice := {"id": "alice", "tenant": "acme", "roles": []}

bob := {"id": "bob", "tenant": "acme", "roles": []}

# An administrator by the token's own roles claim.
admin := {"id": "erin", "tenant": "acme", "roles": ["admin"]}

kb := {"name": "kb", "creator": "alice", "created_at": "2026-12-01T00:00:00Z"}

ask(asker, action, collection) := result if {
	result := collections.decision with input as {"asker": asker, "action": action, "collection": collection}
}

# The decision under config.collections set to `settings`.
ask_with(asker, action, collection, settings) := result if {
	result := collections.decision with input as {"asker": asker, "action": action, "collection": collection}
		with data.whose.config.collections as settings
}

allowed := {"allow": true, "reasons": []}

# --- any member: create, and payload indexes ----------------------------------------

test_any_member_may_create if ask(bob, "create", {"name": "kb"}) == allowed

test_any_member_may_create_and_drop_an_index if {
	ask(bob, "create_index", kb) == allowed
	ask(bob, "drop_index", kb) == allowed
}

# --- drop: the creator or an administrator ----------------------------------------------

test_the_creator_may_drop if ask(alice, "drop", kb) == allowed

test_another_member_may_not_drop if {
	ask(bob, "drop", kb) == {"allow": false, "reasons": ["not_collection_creator", "role_required:admin"]}
}

test_an_admin_may_drop if ask(admin, "drop", kb) == allowed

test_a_directory_role_counts if {
	# The demo directory gives dpo `data_protection`; made an administrator role here.
	dpo := {"id": "dpo", "tenant": "acme"}
	ask_with(dpo, "drop", kb, {"admin_roles": ["data_protection"]}) == allowed
	not ask(dpo, "drop", kb).allow
}

test_configured_roles_replace_admin if {
	owner := {"id": "dave", "tenant": "acme", "roles": ["kb-owner"]}
	settings := {"admin_roles": ["kb-owner"]}
	ask_with(owner, "drop", kb, settings) == allowed
	ask_with(admin, "drop", kb, settings) == {"allow": false, "reasons": ["not_collection_creator", "role_required:kb-owner"]}
	ask_with(alice, "drop", kb, settings) == allowed
}

test_no_admin_roles_leaves_the_creator_alone if {
	ask_with(admin, "drop", kb, {"admin_roles": []}) == {"allow": false, "reasons": ["not_collection_creator"]}
	ask_with(alice, "drop", kb, {"admin_roles": []}) == allowed
}

test_a_collection_without_a_creator_is_an_administrators_to_drop if {
	adopted := {"name": "legacy"}
	ask(alice, "drop", adopted) == {"allow": false, "reasons": ["not_collection_creator", "role_required:admin"]}
	ask(admin, "drop", adopted) == allowed
}

# --- default deny -----------------------------------------------------------------

test_an_unknown_action_is_refused if {
	ask(alice, "rename", kb) == {"allow": false, "reasons": ["unknown_action"]}
	not collections.decision.allow with input as {"asker": alice, "collection": kb}
}

test_an_asker_without_a_name_or_tenant_is_refused if {
	ask({"id": "alice"}, "create", {"name": "kb"}) == {"allow": false, "reasons": ["no_asker"]}
	d := collections.decision with input as {"action": "create", "collection": {"name": "kb"}}
	d.reasons == ["no_asker"]
}

test_a_collection_without_a_name_is_refused if {
	ask(alice, "create", {}) == {"allow": false, "reasons": ["no_collection"]}
}

test_every_refusal_at_once if {
	d := collections.decision with input as {"action": "drop", "collection": {}}
	d == {"allow": false, "reasons": ["no_asker", "no_collection", "not_collection_creator", "role_required:admin"]}
}
