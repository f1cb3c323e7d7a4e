# METADATA
# scope: package
# description: |
#   The evidence policy: what makes "X knows p" more than somebody's belief.
#
#   A holder's own knowledge ("I know p") rests on evidence for p: an item of a
#   kind that attests by itself (a change record, an announcement), or the
#   holder's own acknowledgement. A claim that someone else knows p (the knower
#   is observed_id, not the record's holder) establishes only the holder's belief
#   about them (docs/design.md §1): it is knowledge only with evidence tied to that
#   knower, an item whose `by` names them (their acknowledgement, or the change
#   record or announcement that reached them). Which kinds count, and which only
#   when the knower gave them, is config data (config.evidence).
#
#   Evidence is asked about an instant: disclosure asks at as_of (default now),
#   ingest at the record's own valid_at. An item dated (`at`) after that instant
#   did not exist yet and does not count; an undated item counts at any instant,
#   and an item whose `at` does not parse never counts.
# schemas:
#   - data.whose.config: schema.config
#   - data.whose.directory: schema.directory
package whose.lib.evidence

import data.whose.config

# METADATA
# description: |
#   The knower is the innermost mind the record is a view of (the last of a nested
#   view's observed_path, else the observed principal), else the observer.
knower(record) := record.observed_path[count(record.observed_path) - 1] if {
	count(record.observed_path) > 0
} else := record.observed_id if record.observed_id

else := record.observer_id

# METADATA
# description: some evidence item, existing at instant t, is accepted by the evidence policy for this record's knower.
satisfies(record, t) if {
	some item in record.evidence
	accepted(item, record)
	existed_at(item, t)
}

# METADATA
# description: the item existed at instant t, an RFC 3339 string (undated, or dated by `at` no later than t); an unparseable `at` never did.
existed_at(item, _) if not item.at

existed_at(item, t) if time.parse_rfc3339_ns(item.at) <= time.parse_rfc3339_ns(t)

# METADATA
# description: the record claims its holder's own knowledge, nobody else's (a missing holder is nobody's).
own_knowledge(record) if knower(record) == record.observer_id

# METADATA
# description: the evidence item names the knower in `by` (who acknowledged, or whom it reached).
tied(item, record) if item.by == knower(record)

# Kinds that only count when the knower gave them (an acknowledgement by Bob).
accepted(item, record) if {
	item.kind in config.evidence.signed_by_knower
	tied(item, record)
	cited(item)
}

# Kinds that attest by themselves (a change record, an announcement) support
# the holder's own knowledge. Who may cite them is the write policy's business
# (config.attestation).
accepted(item, record) if {
	attests(item)
	own_knowledge(record)
}

# Someone else's knowledge needs them named: Alice's words and an announcement
# that never mentions Bob do not make Bob know anything.
accepted(item, record) if {
	attests(item)
	tied(item, record)
}

attests(item) if {
	item.kind in config.evidence.accepted_kinds
	not item.kind in config.evidence.signed_by_knower
	cited(item)
}

# Evidence points at something that can be checked.
cited(item) if {
	is_string(item.ref)
	item.ref != ""
}
