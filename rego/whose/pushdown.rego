# Pushdown: constraints every disclosable record meets, for the store to filter on.
#
# The store applies them before ranking, so records the asker may never see do not
# use up the over-fetch budget (and cannot be probed through it). They only narrow
# the candidates: every record is still decided by whose.disclosure. They must
# admit every record the disclosure rules may allow; pushdown_test.rego checks it.
package whose.pushdown

import data.whose.disclosure
import data.whose.lib.directory

# METADATA
# description: per audience member, the audience entries that admit them; the scopes all of them hold.
constraints := {
	"audience_any_of": [entries(member) | some member in disclosure.members],
	"scopes": common_scopes,
}

# METADATA
# description: the audience entries that admit a member (mirrors directory.admits).
entries(member) := {member.id} | {sprintf("group:%s", [group]) | some group in groups_of(member)}

groups_of(member) := {group |
	some group, _ in directory.tenant_of(member).groups
	directory.member_of(member, group)
} | {group | some group in member.groups}

scopes_of(member) := {scope |
	some scope in directory.tenant_of(member).principals[member.id].scopes
} | {scope | some scope in member.scopes}

# METADATA
# description: the scopes every member is cleared for (mirrors directory.clears_scope).
common_scopes := intersection({scopes_of(member) | some member in disclosure.members})

# METADATA
# description: a record meets the constraints (used to test them against disclosure).
admits(record) if {
	every wanted in constraints.audience_any_of {
		some entry in wanted
		entry in record.audience
	}
	scope_ok(record)
}

scope_ok(record) if not record.access_scope

scope_ok(record) if record.access_scope in constraints.scopes
