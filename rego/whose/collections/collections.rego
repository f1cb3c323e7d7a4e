# METADATA
# scope: package
# description: |
#   Collections: may the asker create or drop a stack collection, or one of its
#   payload indexes?
#
#   A RAG stack creates its own collections through the Qdrant dialect
#   (`PUT /collections/kb`); each lives in the asker's tenant (two tenants can each
#   have `kb`, and never see the other's), so every collection asked about here is one
#   of the asker's own tenant. The sidecar asks before it changes anything, and does
#   nothing when the answer is not `allow` (or there is no answer: fail closed).
#
#   Default rules, and why:
#     create, create_index, drop_index: any authenticated member of the tenant. A new
#       collection holds nothing yet; a payload index changes what a search costs,
#       never what anyone may read (every point is still decided by the disclosure
#       policy).
#     drop: only the collection's creator, or a holder of one of the roles
#       config.collections.admin_roles names (["admin"] when unset). Dropping a
#       collection erases every document in it, including ones the dropper may not
#       read, so it is not every member's to do.
#
#   Default deny: an unknown action, an asker without a name or tenant, or a
#   collection without a name is refused, each naming why.
#
#   Input: {asker, action: create | drop | create_index | drop_index, collection:
#   {name, creator?, created_at?}} (`creator`: who created it, absent for create);
#   answer: {allow, reasons}, allowed only when `reasons` is empty.
# schemas:
#   - input: schema.collections_input
#   - data.whose.config: schema.config
#   - data.whose.directory: schema.directory
package whose.collections

import data.whose.config
import data.whose.lib.directory

# METADATA
# description: the decision on the action - allowed only when no rule gives a reason against it.
# entrypoint: true
decision := {"allow": count(denials) == 0, "reasons": sort(denials)}

# METADATA
# description: every reason the action is refused (empty means allow).
denials := union({
	asker_denials,
	action_denials,
	collection_denials,
	drop_denials,
})

# METADATA
# description: the actions this policy decides; any other is refused.
actions := {"create", "drop", "create_index", "drop_index"}

# METADATA
# description: |
#   The roles that may drop any collection of their tenant
#   (data.whose.config.collections.admin_roles), `admin` when unset.
admin_roles := object.get(config, ["collections", "admin_roles"], ["admin"])

# An authenticated asker has a name and a tenant (the collection is the tenant's).
asker_denials := {"no_asker" | not known_asker}

known_asker if {
	is_string(input.asker.id)
	is_string(input.asker.tenant)
}

action_denials := {"unknown_action" | not known_action}

known_action if input.action in actions

collection_denials := {"no_collection" | not named_collection}

named_collection if is_string(input.collection.name)

# METADATA
# description: |
#   A drop erases documents the dropper may not read: only its creator or an
#   administrator may. The refusal names both ways to be allowed.
drop_denials := {"not_collection_creator"} | {sprintf("role_required:%s", [role]) | some role in admin_roles} if {
	input.action == "drop"
	not creator
	not administrator
} else := set()

# METADATA
# description: the asker created the collection (a collection without a recorded creator has none).
creator if {
	is_string(input.collection.creator)
	input.collection.creator == input.asker.id
}

# METADATA
# description: the asker holds one of the administrator roles, by token or by the directory.
administrator if {
	some role in admin_roles
	directory.has_role(input.asker, role)
}
