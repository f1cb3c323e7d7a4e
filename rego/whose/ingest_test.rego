package whose.ingest_test

import data.whose.ingest

alice := {"id": "alice", "tenant": "acme"}

belief := {
	"id": "r1",
	"tenant": "acme",
	"observer_id": "alice",
	"modality": "reported_belief",
	"source_id": "private-session-42",
	"source": {"kind": "conversation", "speaker": "alice"},
	"audience": ["alice"],
}

write(writer, record) := decision if {
	decision := ingest.decision with input as {"writer": writer, "record": record}
}

test_own_belief_allowed if write(alice, belief).allow

test_batch_applies_single_rule_to_every_record if {
	flattened := object.union(belief, {"id": "r2", "observer_id": "bob", "modality": "known"})
	result := ingest.decisions with input as {"writer": alice, "records": [belief, flattened]}
	result.r1 == write(alice, belief)
	result.r2 == write(alice, flattened)
	not result.r2.allow
}

test_default_deny_without_writer if {
	d := ingest.decision with input as {"record": belief}
	not d.allow
	"no_writer" in d.reasons
}

test_tenant_mismatch_refused if {
	d := write({"id": "alice", "tenant": "globex"}, belief)
	d.reasons == {"tenant_mismatch"}
}

test_empty_audience_refused if {
	d := write(alice, object.union(belief, {"audience": []}))
	d.reasons == {"empty_audience"}
}

test_missing_audience_refused if {
	d := write(alice, object.remove(belief, ["audience"]))
	d.reasons == {"empty_audience"}
}

# The seed failure: "Alice thinks Bob knows p" stored as "Bob knows p".
test_flattened_knowledge_refused if {
	d := write(alice, object.union(belief, {"observer_id": "bob", "modality": "known"}))
	not d.allow
	"observer_not_speaker" in d.reasons
	"known_without_evidence" in d.reasons
}

test_flattened_belief_refused if {
	d := write(alice, object.union(belief, {"observer_id": "bob"}))
	d.reasons == {"observer_not_speaker"}
}

test_belief_about_another_allowed if {
	write(alice, object.union(belief, {"observed_id": "bob", "observed_attitude": "knows"})).allow
}

test_known_without_evidence_refused if {
	d := write(alice, object.union(belief, {"modality": "known"}))
	d.reasons == {"known_without_evidence"}
}

test_known_with_insufficient_evidence_refused if {
	record := object.union(belief, {
		"modality": "known", "observed_id": "bob",
		"evidence": [{"kind": "acknowledgement", "by": "alice", "ref": "msg-1"}],
	})
	write(alice, record).reasons == {"known_without_evidence"}
}

test_known_with_evidence_allowed if {
	record := object.union(belief, {
		"modality": "known", "observed_id": "bob",
		"evidence": [{"kind": "acknowledgement", "by": "bob", "ref": "msg-9"}],
	})
	write(alice, record).allow
}

test_common_knowledge_without_announcement_refused if {
	d := write(alice, object.union(belief, {"modality": "common_knowledge", "audience": ["group:launch-team"]}))
	d.reasons == {"common_knowledge_without_announcement"}
}

test_common_knowledge_from_announcement_allowed if {
	record := object.union(belief, {
		"modality": "common_knowledge",
		"source": {"kind": "announcement", "speaker": "alice", "channel": "all-hands"},
		"audience": ["group:launch-team"],
	})
	write(alice, record).allow
}

change_record := {
	"id": "w1",
	"tenant": "acme",
	"modality": "world_state",
	"source_id": "CR-7",
	"source": {"kind": "change_record"},
	"audience": ["group:launch-team"],
}

test_authoritative_source_refused_without_authority if {
	d := write(alice, change_record)
	d.reasons == {"authoritative_source_needs_authority"}
}

test_authoritative_source_allowed_for_directory_authority if write({"id": "release-bot", "tenant": "acme"}, change_record).allow

test_authoritative_source_allowed_for_token_authority if write({"id": "dave", "tenant": "acme", "roles": ["authority"]}, change_record).allow

test_unverified_world_state_allowed_for_anyone if {
	write(alice, object.union(change_record, {"source": {"kind": "conversation"}})).allow
}
