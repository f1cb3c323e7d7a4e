# The evidence policy: what makes "X knows p" more than somebody's belief.
package whose.lib.evidence

import data.whose.config

# METADATA
# description: the knower is the observed principal if any, else the observer.
knower(record) := record.observed_id if record.observed_id

else := record.observer_id

# METADATA
# description: some evidence item is accepted by the evidence policy for this knower.
satisfies(record) if {
	some item in record.evidence
	accepted(item, knower(record))
}

# Kinds that attest by themselves (a change record, an announcement). Who may
# cite them is the write policy's business (config.attestation).
accepted(item, _) if {
	item.kind in config.evidence.accepted_kinds
	not item.kind in config.evidence.signed_by_knower
	cited(item)
}

# Kinds that only count when the knower gave them (an acknowledgement by Bob).
accepted(item, knower) if {
	item.kind in config.evidence.signed_by_knower
	item.by == knower
	cited(item)
}

# Evidence points at something that can be checked.
cited(item) if {
	is_string(item.ref)
	item.ref != ""
}
