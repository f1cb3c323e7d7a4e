package whose.erasure_test

import data.whose.erasure

alice := {"id": "alice", "tenant": "acme"}

bob := {"id": "bob", "tenant": "acme"}

# An erasure officer by the demo directory (rego/whose/directory/data.json).
dpo := {"id": "dpo", "tenant": "acme"}

belief := {
	"id": "r1",
	"tenant": "acme",
	"observer_id": "alice",
	"observed_id": "carol",
	"modality": "believed",
	"source_id": "chat-1",
	"source": {"kind": "conversation", "speaker": "alice"},
	"provenance": {"writer": "relay"},
	"audience": ["alice", "bob"],
	"recorded_at": "2026-10-01T00:00:00Z",
}

ask(asker, request, records) := answer if {
	answer := erasure.answer with input as {
		"asker": asker,
		"request": request,
		"records": records,
		"now": "2026-12-01T00:00:00Z",
	}
}

by_id := {"kind": "records"}

test_holder_may_erase if ask(alice, by_id, [belief]).decisions.r1.allow

test_speaker_may_erase_a_claim_without_holder if {
	said := json.remove(belief, ["observer_id"])
	ask(alice, by_id, [said]).decisions.r1.allow
}

test_writer_may_erase if ask({"id": "relay", "tenant": "acme"}, by_id, [belief]).decisions.r1.allow

test_audience_member_may_not_erase if {
	d := ask(bob, by_id, [belief]).decisions.r1
	not d.allow
	d.reasons == {"not_holder_or_writer"}
}

test_officer_may_erase_any_record if ask(dpo, by_id, [belief]).decisions.r1.allow

test_other_tenant_refused if {
	d := ask({"id": "alice", "tenant": "globex"}, by_id, [belief]).decisions.r1
	"tenant_mismatch" in d.reasons
}

test_default_deny_without_asker if {
	answer := erasure.answer with input as {"request": by_id, "records": [belief], "now": "2026-12-01T00:00:00Z"}
	not answer.request.allow
	"no_asker" in answer.decisions.r1.reasons
}

test_derived_records_are_flagged_by_default if ask(alice, by_id, [belief]).decisions.r1.derived == "flag"

test_derived_choice_from_config if {
	answer := ask(alice, by_id, [belief]) with data.whose.config.erasure.on_derived as "erase"
	answer.decisions.r1.derived == "erase"
}

test_flagged_without_erasure_config if {
	answer := ask(alice, by_id, [belief]) with data.whose.config as {}
	answer.decisions.r1.derived == "flag"
	answer.decisions.r1.allow
}

test_a_record_request_is_never_unrestricted if not ask(dpo, by_id, [belief]).request.unrestricted

test_subject_request_needs_an_officer if {
	answer := ask(alice, {"kind": "subject", "subject": "alice"}, [belief])
	answer.request.reasons == {"needs_erasure_officer"}
	not answer.request.unrestricted
	not answer.decisions.r1.allow
}

test_no_officer_without_erasure_config if {
	answer := ask(dpo, {"kind": "tenant"}, [belief]) with data.whose.config as {}
	answer.request.reasons == {"needs_erasure_officer"}
}

test_officer_subject_request_is_unrestricted if {
	answer := ask(dpo, {"kind": "subject", "subject": "alice"}, [belief])
	answer.request.allow
	answer.request.unrestricted
	answer.decisions.r1.allow
}

test_officer_role_from_the_token if {
	answer := ask({"id": "someone", "tenant": "acme", "roles": ["data_protection"]}, {"kind": "tenant"}, [belief])
	answer.decisions.r1.allow
}

test_subject_request_reaches_the_observed_mind if {
	ask(dpo, {"kind": "subject", "subject": "carol"}, [belief]).decisions.r1.allow
}

test_subject_request_erases_only_records_about_the_subject if {
	d := ask(dpo, {"kind": "subject", "subject": "erin"}, [belief]).decisions.r1
	d.reasons == {"not_about_subject"}
}

test_subject_and_source_must_be_named if {
	ask(dpo, {"kind": "subject"}, []).request.reasons == {"subject_missing"}
	ask(dpo, {"kind": "source"}, []).request.reasons == {"source_missing"}
}

test_source_request_erases_only_that_source if {
	answer := ask(dpo, {"kind": "source", "source": "chat-2"}, [belief])
	answer.decisions.r1.reasons == {"not_from_source"}
	ask(dpo, {"kind": "source", "source": "chat-1"}, [belief]).decisions.r1.allow
}

test_legal_hold_stops_even_the_officer if {
	d := ask(dpo, by_id, [belief]).decisions.r1 with data.whose.holds as {"tenants": {"acme": {"records": ["r1"], "subjects": []}}}
	d.reasons == {"legal_hold"}
}

test_a_derivation_is_erased_with_its_premise_whoever_holds_it if {
	answer := ask(alice, {"kind": "derived"}, [object.union(belief, {"observer_id": "bob"})])
	answer.request.allow
	not answer.request.unrestricted
	answer.decisions.r1.allow
}

test_a_held_derivation_is_not_erased_with_its_premise if {
	answer := ask(alice, {"kind": "derived"}, [belief]) with data.whose.holds as {"tenants": {"acme": {"records": [], "subjects": ["carol"]}}}
	answer.decisions.r1.reasons == {"legal_hold"}
}

test_unknown_kind_refused if ask(dpo, {"kind": "everything"}, []).request.reasons == {"unknown_kind"}

keyed := object.union(belief, {"proposition": {"key": "safe.code"}})

test_proposition_request_by_an_officer_reaches_every_record_of_the_key if {
	answer := ask(dpo, {"kind": "proposition", "key": "safe.code"}, [keyed])
	answer.request.allow
	answer.request.unrestricted
	answer.decisions.r1.allow
}

test_proposition_request_erases_only_that_key if {
	d := ask(dpo, {"kind": "proposition", "key": "pin"}, [keyed]).decisions.r1
	d.reasons == {"not_about_key"}
	ask(dpo, {"kind": "proposition", "key": "pin"}, [belief]).decisions.r1.reasons == {"not_about_key"}
}

test_proposition_request_names_its_key if {
	ask(dpo, {"kind": "proposition"}, []).request.reasons == {"key_missing"}
}

test_content_request_by_anyone_else_is_restricted_to_their_own_records if {
	answer := ask(alice, {"kind": "query"}, [keyed])
	answer.request.allow
	not answer.request.unrestricted
	answer.decisions.r1.allow
	ask(bob, {"kind": "query"}, [keyed]).decisions.r1.reasons == {"not_holder_or_writer"}
}

test_forget_request_for_a_value_reaches_any_record if {
	request := {"kind": "forget", "rule_kind": "value", "subject": "erin"}
	ask(dpo, request, [belief]).decisions.r1.allow
}

test_forget_request_for_a_key_reaches_the_subjects_records_of_the_key if {
	request := {"kind": "forget", "rule_kind": "key", "subject": "alice", "key": "safe.code"}
	ask(alice, request, [keyed]).decisions.r1.allow
	ask(dpo, json.patch(request, [{"op": "replace", "path": "/subject", "value": "erin"}]), [keyed]).decisions.r1.reasons == {"not_about_subject"}
	ask(alice, request, [belief]).decisions.r1.reasons == {"not_about_key"}
}
