# METADATA
# scope: package
# description: |
#   Who may see a record at all: the hard constraints every disclosure and every
#   write that reads records (premises, the writer's own record) shares.
#
#   A person sees a record when it is of their tenant, its audience admits them
#   (by name or through a group), and they are cleared for its access scope. The
#   disclosure policy denies exactly when this fails for the asker or someone in
#   the audience (besides time and the question's own shape), so the store filter
#   the sidecar derives from `visible_to` (OPA's Compile API) keeps out exactly the
#   records nobody in the audience may see, and nothing else: docs/design.md,
#   "Pushdown".
# schemas:
#   - data.whose.config: schema.config
#   - data.whose.directory: schema.directory
package whose.lib.visibility

import data.whose.lib.directory

# METADATA
# description: |
#   The person (asker, audience member or writer) may see the record: of their
#   tenant, admitted by its audience, and the record has no scope or one they are
#   cleared for. `admitted` and `cleared` are written out here, one body per kind
#   of scope: the disclosure asks this for every record and hearer, and a function
#   call costs as much as the check itself. The known entries are iterated, so that
#   with the record unknown (pushdown) what is left is "the audience holds <entry>",
#   one alternative per entry.
visible_to(record, person) if {
	record.tenant == person.tenant
	sight := sight_of(person)
	some entry in sight.entries
	entry in record.audience
	not record.access_scope
}

visible_to(record, person) if {
	record.tenant == person.tenant
	sight := sight_of(person)
	record.access_scope in sight.scopes
	some entry in sight.entries
	entry in record.audience
}

# METADATA
# description: |
#   What a person sees by, worked out from the person alone: the audience entries
#   that admit them (their id, and `group:` with each group they are in, from the
#   directory or their own token) and the scopes they are cleared for. OPA keeps a function's result for the same
#   arguments within a query, so deciding many records for one person works this
#   out once and each record costs set look-ups (docs/operations.md, "Performance").
sight_of(person) := {
	"entries": ({id | id := person.id} | {concat("", ["group:", group]) | some group in directory.groups_of(person)}),
	"scopes": directory.clearances_of(person),
}

# METADATA
# description: the record's audience names the sight's id or one of its groups.
admitted(record, sight) if {
	some entry in sight.entries
	entry in record.audience
}

# METADATA
# description: the record has no access scope, or one the sight is cleared for.
cleared(record, _) if not record.access_scope

cleared(record, sight) if record.access_scope in sight.scopes

# METADATA
# description: |
#   Why the person may not see the record: never empty when `visible_to` fails, so
#   a denial always says why (an unforeseen cause still denies, as not_visible).
why_not(record, person) := unseen_because(record, person) if {
	not visible_to(record, person)
} else := set()

# METADATA
# description: why_not, for a person already known not to see the record (`hearers` asks once).
unseen_because(record, person) := found if {
	found := causes(record, person)
	count(found) > 0
} else := {sprintf("not_visible:%s", [person.id])}

causes(record, person) := union({
	{"tenant_mismatch" | record.tenant != person.tenant},
	{"tenant_mismatch" | not record.tenant},
	{sprintf("audience_excludes:%s", [person.id]) | not admitted(record, sight_of(person))},
	{sprintf("scope_not_cleared:%s", [person.id]) | not cleared(record, sight_of(person))},
})
