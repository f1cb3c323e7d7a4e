# METADATA
# scope: package
# description: |
#   Why a record may not be disclosed. Every rule of this package is a denial: a
#   set of reasons per record id (of data.whose.disclosure.records). The decision
#   allows a record only when no rule here gives it a reason, and explain lists
#   each rule by its name: a new rule needs no registration anywhere.
#
#   Whether a hearer may see a record at all is lib/visibility/visibility.rego's
#   `visible_to`, or a subject's grant (disclosure.granted): `hearers` denies exactly
#   when both fail for someone (the pushdown adds each grant as an alternative to
#   the audience it derives from `visible_to`, policy/pushdown.py), and the rest
#   depend on the question alone or on time, so the store filter derived from
#   `visible_to` keeps out exactly the records denied here (docs/design.md,
#   "Pushdown").
# schemas:
#   - input: schema.disclosure_input
#   - data.whose.config: schema.config
#   - data.whose.directory: schema.directory
package whose.disclosure.denials

import data.whose.disclosure
import data.whose.lib.visibility

# METADATA
# description: an identity without a subject or a tenant is a wiring bug upstream; refuse.
asker[record.id] contains "no_asker" if {
	not disclosure.known_asker
	some record in disclosure.records
}

# METADATA
# description: |
#   Someone who will hear the answer (the asker or an audience member) may not see
#   the record, and no live grant of its subject lets them (disclosure.granted).
hearers[record.id] contains reason if {
	some record in disclosure.records
	some member in disclosure.members
	not visibility.visible_to(record, member)
	not disclosure.granted(record, member)
	some reason in visibility.unseen_because(record, member)
}

# METADATA
# description: an unknown purpose is a caller bug; refuse rather than guess which rules apply.
purpose[record.id] contains "unknown_purpose" if {
	not input.purpose in {"recall", "get", "history", "explain"}
	some record in disclosure.records
}

# METADATA
# description: recall asks for what applied at as_of; get and history show any version.
instant[record.id] contains "not_valid_at_as_of" if {
	input.purpose == "recall"
	some record in disclosure.records
	not disclosure.applies(record)
}
