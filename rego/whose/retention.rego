# Retention: which records have outlived the longest time the tenant may keep them?
#
# Input: {records, now}. The sweeper (`whose sweep`, and the server on a
# schedule) asks about a page of stored records at a time and erases those that
# expire. A rule in data.whose.config.retention.rules names a maximum age and
# optionally the tenant, modality, source kind and access scope it covers; the
# shortest rule that covers a record applies. A legal hold keeps a record
# whatever its age.
# METADATA
# scope: package
# schemas:
#   - input: schema.retention_input
#   - data.whose.config: schema.config
#   - data.whose.holds: schema.holds
package whose.retention

import data.whose.config
import data.whose.lib.subjects

# METADATA
# description: one decision per record, keyed by id.
# entrypoint: true
decisions := {record.id: decide(record) | some record in input.records}

# METADATA
# description: |
#   The decision for one record: `expire` when it is older than its maximum age
#   and no hold keeps it; `held` when a legal hold keeps it.
decide(record) := {"expire": expired(record), "held": subjects.held(record)}

default expired(_) := false

expired(record) if {
	not subjects.held(record)
	age_ns(record) > max_age_ns(record)
}

age_ns(record) := time.parse_rfc3339_ns(input.now) - time.parse_rfc3339_ns(record.recorded_at)

# METADATA
# description: the shortest maximum age of the rules that cover the record (undefined: none covers it).
max_age_ns(record) := min({rule.max_age_days | some rule in config.retention.rules; covers(rule, record)}) * 86400000000000

covers(rule, record) if {
	matches(rule, "tenant", record.tenant)
	matches(rule, "modality", record.modality)
	matches(rule, "source_kind", object.get(record, ["source", "kind"], null))
	matches(rule, "access_scope", object.get(record, "access_scope", null))
}

matches(rule, field, _) if not rule[field]

matches(rule, field, value) if rule[field] == value
