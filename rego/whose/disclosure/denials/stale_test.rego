# METADATA
# scope: package
# description: |
#   Stale propagation (docs/design.md §4): a derivation from a premise that no longer
#   applies is refused; a stale derivation is disclosed as such, or withheld when the
#   config says so.
package whose.disclosure.denials_test

import data.whose.disclosure
import data.whose.ingest

alice := {"id": "alice", "tenant": "acme"}

venue := {
	"id": "p1",
	"tenant": "acme",
	"observer_id": "alice",
	"modality": "believed",
	"source_id": "chat-1",
	"source": {"kind": "conversation", "speaker": "alice"},
	"audience": ["alice", "bob"],
	"valid_at": "2026-10-01T00:00:00Z",
}

# Alice's "Hall A", replaced by "Hall B" on October 5.
replaced := object.union(venue, {"invalid_at": "2026-10-05T00:00:00Z", "superseded_by": "p2"})

summary(valid_at) := object.union(venue, {
	"id": "s1",
	"valid_at": valid_at,
	"provenance": {"derived_from": ["p1"]},
})

derive(record, premise) := decision if {
	decision := ingest.decision with input as {"writer": alice, "record": record, "premises": [premise]}
}

test_summary_of_a_current_premise_allowed if derive(summary("2026-10-06T00:00:00Z"), venue).allow

test_summary_of_a_replaced_premise_refused if {
	d := derive(summary("2026-10-06T00:00:00Z"), replaced)
	d.reasons == {"premise_superseded"}
}

test_summary_of_what_applied_then_allowed if derive(summary("2026-10-03T00:00:00Z"), replaced).allow

stale_summary := object.union(summary("2026-10-03T00:00:00Z"), {"premise_changes": [{
	"premise": "p1",
	"change": "erased",
	"recorded_at": "2026-10-07T00:00:00Z",
}]})

test_summary_of_a_stale_summary_refused if {
	record := object.union(summary("2026-10-08T00:00:00Z"), {"id": "s2", "provenance": {"derived_from": ["s1"]}})
	d := derive(record, stale_summary)
	d.reasons == {"premise_stale"}
}

ask(record) := decision if {
	decision := disclosure.single with input as {
		"asker": {"id": "bob", "tenant": "acme"},
		"audience": [],
		"purpose": "recall",
		"now": "2026-10-08T00:00:00Z",
		"record": record,
	}
}

test_stale_summary_disclosed_with_a_note if {
	d := ask(stale_summary)
	d.allow
	d.reasons == {"premise_erased"}
}

test_stale_summary_withheld_when_the_config_says_so if {
	d := ask(stale_summary) with data.whose.config.stale.withhold as ["erased"]
	not d.allow
	d.reasons == {"premise_erased"}
}

test_explanation_lists_the_lineage_notes if {
	explained := disclosure.explanation with input as {
		"asker": {"id": "bob", "tenant": "acme"},
		"audience": [],
		"purpose": "recall",
		"now": "2026-10-08T00:00:00Z",
		"record": stale_summary,
	}
	{"rule": "data.whose.lib.lineage.notes", "reasons": ["premise_erased"]} in explained.rules
}
