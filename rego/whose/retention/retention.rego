# METADATA
# scope: package
# description: |
#   Retention: which records have outlived the longest time they may be kept?
#
#   Input: {records, now}. The sweeper (`whose sweep`, and the server on a schedule)
#   asks about a page of stored records at a time and erases those that expire. A
#   rule in config.retention.rules names a maximum age in days after `recorded_at`
#   and, optionally, the tenant, modality, source kind, source id and access scope it
#   covers; the shortest rule that covers a record applies, and a record no rule
#   covers is kept. A legal hold (data.whose.holds) keeps a record whatever its age.
# schemas:
#   - input: schema.retention_input
#   - data.whose.config: schema.config
#   - data.whose.holds: schema.holds
package whose.retention

import data.whose.lib.subjects

# METADATA
# description: one decision per record, keyed by id.
# entrypoint: true
decisions := {record.id: decide(record) | some record in input.records}

# METADATA
# description: |
#   The decision for one record: `expire` when it is older than its maximum age and
#   no hold keeps it, `held` when a legal hold keeps it, and `derived`: what becomes
#   of the records derived from it once it is erased (as for an erasure request).
decide(record) := {
	"expire": expired(record),
	"held": subjects.held(record),
	"derived": object.get(data.whose.config, ["erasure", "on_derived"], "flag"),
}

# METADATA
# description: |
#   The shortest maximum age of all the rules, in days (undefined without rules): the
#   sweeper examines only records older than this.
# entrypoint: true
shortest_max_age_days := min({rule.max_age_days | some rule in rules})

rules := object.get(data.whose.config, ["retention", "rules"], [])

default expired(_) := false

expired(record) if {
	not subjects.held(record)
	age_ns(record) > max_age_ns(record)
}

age_ns(record) := time.parse_rfc3339_ns(input.now) - time.parse_rfc3339_ns(record.recorded_at)

# The shortest maximum age of the rules that cover the record (undefined: none does).
max_age_ns(record) := (min({rule.max_age_days | some rule in rules; covers(rule, record)}) * 86400) * 1000000000

covers(rule, record) if {
	matches(rule, "tenant", record.tenant)
	matches(rule, "modality", record.modality)
	matches(rule, "source_kind", object.get(record, ["source", "kind"], null))
	matches(rule, "source_id", record.source_id)
	matches(rule, "access_scope", object.get(record, "access_scope", null))
}

matches(rule, field, _) if object.get(rule, field, null) == null

matches(rule, field, value) if rule[field] == value
