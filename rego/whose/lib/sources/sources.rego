# METADATA
# scope: package
# description: |
#   Which sources carry authority and which announcements make common knowledge.
# schemas:
#   - data.whose.config: schema.config
#   - data.whose.directory: schema.directory
package whose.lib.sources

import data.whose.config
import data.whose.lib.directory

# METADATA
# description: the record comes from a source kind the config names authoritative.
authoritative(record) if record.source.kind in config.authoritative.source_kinds

# METADATA
# description: |
#   A group announcement on a qualifying channel (not a pile of private observations).
#   Common knowledge is of real groups: every `group:` entry of the audience must be a
#   group its tenant's directory defines (one that exists only in a token, or nowhere,
#   has no members anyone can name).
qualifying_announcement(record) if {
	record.source.kind == "announcement"
	record.source.channel in config.announcements.qualifying_channels
	groups := audience_groups(record)
	count(groups) > 0
	every group in groups {
		directory.defines_group(record.tenant, group)
	}
}

# METADATA
# description: |
#   An announcement that makes common knowledge in its groups: on a qualifying
#   channel, or witnessed by every member of them.
announced_to_group(record) if qualifying_announcement(record)

announced_to_group(record) if witnessed_announcement(record)

# METADATA
# description: |
#   An announcement every member the directory lists in its groups was present for,
#   their witnessing cited: each heard it and saw the others hear it, on any channel.
#   Asked again at every read: a member added since was not there, and then it is
#   no longer common knowledge in the group.
witnessed_announcement(record) if {
	record.source.kind == "announcement"
	groups := audience_groups(record)
	count(groups) > 0
	every group in groups {
		directory.defines_group(record.tenant, group)
		every member in directory.members_of(record.tenant, group) {
			witnessed(record, member)
		}
	}
}

# METADATA
# description: a witnessed announcement (it cites witnessing) that some member of its groups was not present for.
member_absent(record) if {
	record.source.kind == "announcement"
	some item in record.evidence
	item.kind == "witnessed"
	some group in audience_groups(record)
	some member in directory.members_of(record.tenant, group)
	not witnessed(record, member)
}

# METADATA
# description: |
#   The person was there: among the source's participants, with their witnessing
#   cited (an evidence item of kind `witnessed` whose `by` names them).
witnessed(record, person) if {
	person in record.source.participants
	some item in record.evidence
	item.kind == "witnessed"
	item.by == person
}

# METADATA
# description: |
#   Everyone the directory lists in the record's groups may see it: common knowledge
#   in G is had by every member of G, and a member not cleared for the record's
#   access scope cannot have it. Checked at write and again at read, so a member
#   added (or a clearance revoked) since makes it no longer common knowledge.
reaches_every_member(record) if not record.access_scope

reaches_every_member(record) if {
	record.access_scope
	every group in audience_groups(record) {
		every member in directory.members_of(record.tenant, group) {
			directory.cleared_for({"id": member, "tenant": record.tenant}, record.access_scope)
		}
	}
}

# METADATA
# description: the groups (bare names) the record's audience names.
audience_groups(record) := {trim_prefix(entry, "group:") |
	some entry in record.audience
	startswith(entry, "group:")
}

# METADATA
# description: |
#   A shared claim (world state, common knowledge) that names someone's mind
#   (observed_id, B_A(K_B p)): that is A's view of B, never world state p nor common
#   knowledge in a group (which would say that B, like everyone in it, knows p). The
#   write policy refuses it; one stored anyway is disclosed as a nested belief.
shared_claim_about_another(record) if {
	record.observed_id
	record.modality in {"world_state", "common_knowledge"}
}
