# Which sources carry authority and which announcements make common knowledge.
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
# description: the groups (bare names) the record's audience names.
audience_groups(record) := {trim_prefix(entry, "group:") |
	some entry in record.audience
	startswith(entry, "group:")
}
