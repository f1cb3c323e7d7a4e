# METADATA
# scope: package
# description: |
#   Lineage: what became of the premises a derived record was made from.
#
#   The sidecar marks a derived record (`premise_changes`) when one of its premises
#   is superseded, erased, withdrawn or narrowed (sidecar/writes/lineage.py). Such a
#   record is no longer served as current: the sidecar says `stale`, and the
#   disclosure notes say why, one note per kind of change. config.stale.withhold
#   names the changes after which it is not disclosed at all (none by default).
# schemas:
#   - data.whose.config: schema.config
package whose.lib.lineage

# METADATA
# description: a note for each way a premise of the record changed (premise_superseded, premise_erased, ...).
notes(record) := {concat("_", ["premise", change.change]) | some change in record.premise_changes}

# METADATA
# description: a premise of the record changed in a way config.stale.withhold names.
withheld(record) if {
	some change in record.premise_changes
	change.change in object.get(data.whose.config, ["stale", "withhold"], [])
}
