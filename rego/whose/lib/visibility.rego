# Who may see a record at all: the hard constraints every disclosure and every
# write that reads records (premises, the writer's own record) shares.
#
# A person sees a record when it is of their tenant, its audience admits them
# (by name or through a group), and they are cleared for its access scope. The
# disclosure policy denies exactly when this fails for the asker or someone in
# the audience (besides time and the question's own shape), so the store filter
# the sidecar derives from `visible_to` (OPA's Compile API) keeps out exactly the
# records nobody in the audience may see, and nothing else: docs/design.md,
# "Pushdown".
# METADATA
# scope: package
# schemas:
#   - data.whose.config: schema.config
#   - data.whose.directory: schema.directory
package whose.lib.visibility

import data.whose.lib.directory

# METADATA
# description: the person (asker, audience member or writer) may see the record.
visible_to(record, person) if {
	record.tenant == person.tenant
	directory.admits(record, person)
	directory.clears_scope(record, person)
}

# METADATA
# description: |
#   Why the person may not see the record: never empty when `visible_to` fails, so
#   a denial always says why (an unforeseen cause still denies, as not_visible).
why_not(record, person) := reasons if {
	not visible_to(record, person)
	found := causes(record, person)
	count(found) > 0
	reasons := found
} else := {sprintf("not_visible:%s", [person.id])} if {
	not visible_to(record, person)
} else := set()

causes(record, person) := union({
	{"tenant_mismatch" | record.tenant != person.tenant},
	{"tenant_mismatch" | not record.tenant},
	{sprintf("audience_excludes:%s", [person.id]) | not directory.admits(record, person)},
	{sprintf("scope_not_cleared:%s", [person.id]) | not directory.clears_scope(record, person)},
})
