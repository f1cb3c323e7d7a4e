package whose.lib.lineage_test

import data.whose.lib.lineage

summary := {
	"id": "s1",
	"premise_changes": [
		{"premise": "p1", "change": "superseded", "recorded_at": "2026-10-02T00:00:00Z"},
		{"premise": "p2", "change": "erased", "recorded_at": "2026-10-03T00:00:00Z"},
	],
}

test_a_note_per_change if lineage.notes(summary) == {"premise_superseded", "premise_erased"}

test_no_notes_for_a_record_without_changes if count(lineage.notes({"id": "r1"})) == 0

test_disclosed_unless_the_config_withholds if not lineage.withheld(summary)

test_withheld_when_the_config_names_a_change if {
	lineage.withheld(summary) with data.whose.config.stale.withhold as ["erased"]
	not lineage.withheld(summary) with data.whose.config.stale.withhold as ["narrowed"]
}
