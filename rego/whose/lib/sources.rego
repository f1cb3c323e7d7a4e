# Which sources carry authority and which announcements make common knowledge.
package whose.lib.sources

import data.whose.config

# METADATA
# description: the record comes from a source kind the config names authoritative.
authoritative(record) if record.source.kind in config.authoritative.source_kinds

# METADATA
# description: a group announcement on a qualifying channel (not a pile of private observations).
qualifying_announcement(record) if {
	record.source.kind == "announcement"
	record.source.channel in config.announcements.qualifying_channels
	some entry in record.audience
	startswith(entry, "group:")
}
