package whose.disclosure.denials

# Stale derivations: a denial of whose.disclosure.denials (see denials.rego), in a
# file of its own beside the lineage it reads (lib/lineage/lineage.rego).

import data.whose.lib.lineage

# METADATA
# description: |
#   A derived record whose premises changed in a way config.stale.withhold names
#   (erased, say) is not disclosed; otherwise it is, as stale, with its notes.
stale[record.id] contains note if {
	some record in data.whose.disclosure.records
	lineage.withheld(record)
	some note in lineage.notes(record)
}
