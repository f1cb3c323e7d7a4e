package whose.disclosure_test

import data.whose.disclosure

now := "2026-11-30T12:00:00Z"

alice := {"id": "alice", "tenant": "acme"}

bob := {"id": "bob", "tenant": "acme"}

carol := {"id": "carol", "tenant": "acme"}

# Alice, in a private session: "I think the launch is October 17."
private_belief := {
	"id": "r1",
	"tenant": "acme",
	"observer_id": "alice",
	"modality": "reported_belief",
	"source_id": "private-session-42",
	"source": {"kind": "conversation", "speaker": "alice"},
	"audience": ["alice"],
	"valid_at": "2026-10-01T00:00:00Z",
}

team_belief := object.union(private_belief, {"id": "r2", "audience": ["group:launch-team"]})

scoped_belief := object.union(team_belief, {"id": "r3", "access_scope": "launch-core"})

ask(asker, record) := ask_with(asker, [], record)

ask_with(asker, audience, record) := decision if {
	decision := disclosure.single with input as {
		"asker": asker,
		"audience": audience,
		"purpose": "recall",
		"now": now,
		"record": record,
	}
}

# --- batch and single rule agree ---

test_batch_applies_single_rule_to_every_record if {
	result := disclosure.decisions with input as {
		"asker": bob,
		"purpose": "recall",
		"now": now,
		"records": [private_belief, team_belief],
	}
	result.r1 == ask(bob, private_belief)
	result.r2 == ask(bob, team_belief)
	result.r1.allow == false
	result.r2.allow == true
}

test_batch_answer_carries_the_vocabulary_that_words_it if {
	answer := disclosure.batch with input as {
		"asker": bob,
		"purpose": "recall",
		"now": now,
		"records": [team_belief],
	}
	answer.decisions.r2.allow
	answer.vocabulary.uses[answer.decisions.r2.usable_as].sentence
}

# --- default deny ---

test_default_deny_without_asker if {
	d := disclosure.single with input as {"purpose": "recall", "now": now, "record": team_belief}
	not d.allow
	"no_asker" in d.reasons
}

test_default_deny_asker_without_tenant if {
	d := ask({"id": "bob"}, team_belief)
	not d.allow
	"no_asker" in d.reasons
}

test_default_deny_record_without_audience if {
	not ask(alice, object.remove(private_belief, ["audience"])).allow
}

# --- tenant ---

test_holder_sees_own_private_belief if ask(alice, private_belief).allow

test_tenant_mismatch_denied if {
	d := ask({"id": "alice", "tenant": "globex"}, private_belief)
	not d.allow
	"tenant_mismatch" in d.reasons
}

test_record_without_tenant_denied if {
	d := ask(alice, object.remove(private_belief, ["tenant"]))
	"tenant_mismatch" in d.reasons
}

# --- audience ---

test_private_belief_not_disclosed_to_bob if {
	d := ask(bob, private_belief)
	not d.allow
	"audience_excludes:bob" in d.reasons
}

test_group_audience_admits_member if ask(bob, team_belief).allow

test_token_group_claim_admits_bearer if {
	record := object.union(private_belief, {"audience": ["group:ops"]})
	ask({"id": "dave", "tenant": "acme", "groups": ["ops"]}, record).allow
}

test_every_audience_member_must_be_admitted if {
	d := ask_with(alice, ["bob"], private_belief)
	not d.allow
	d.reasons == {"audience_excludes:bob"}
}

test_audience_member_claims_do_not_come_from_the_askers_token if {
	record := object.union(private_belief, {"audience": ["alice", "group:ops"]})
	d := ask_with({"id": "alice", "tenant": "acme", "groups": ["ops"]}, ["dave"], record)
	"audience_excludes:dave" in d.reasons
}

# --- scope clearance ---

test_scope_cleared_member_allowed if ask(carol, scoped_belief).allow

test_scope_not_cleared_denied if {
	d := ask(bob, scoped_belief)
	not d.allow
	d.reasons == {"scope_not_cleared:bob"}
}

test_least_cleared_member_limits_the_answer if {
	d := ask_with(alice, ["carol", "bob"], scoped_belief)
	d.reasons == {"scope_not_cleared:bob"}
}

# --- valid time ---

test_not_yet_valid_denied_for_recall if {
	d := disclosure.single with input as {
		"asker": alice, "purpose": "recall", "now": now,
		"as_of": "2026-09-01T00:00:00Z", "record": private_belief,
	}
	d.reasons == {"not_valid_at_as_of"}
}

test_superseded_denied_for_current_recall if {
	record := object.union(private_belief, {"invalid_at": "2026-11-01T00:00:00Z"})
	d := ask(alice, record)
	d.reasons == {"not_valid_at_as_of"}
}

test_superseded_allowed_for_recall_as_of_then if {
	record := object.union(private_belief, {"invalid_at": "2026-11-01T00:00:00Z"})
	disclosure.single.allow with input as {
		"asker": alice, "purpose": "recall", "now": now,
		"as_of": "2026-10-15T00:00:00Z", "record": record,
	}
}

test_history_shows_superseded_versions if {
	record := object.union(private_belief, {"invalid_at": "2026-11-01T00:00:00Z"})
	disclosure.single.allow with input as {"asker": alice, "purpose": "history", "now": now, "record": record}
}

test_history_still_gated_by_audience if {
	record := object.union(private_belief, {"invalid_at": "2026-11-01T00:00:00Z"})
	not disclosure.single.allow with input as {"asker": bob, "purpose": "history", "now": now, "record": record}
}

test_unknown_purpose_denied if {
	d := disclosure.single with input as {"asker": alice, "purpose": "anything", "now": now, "record": private_belief}
	d.reasons == {"unknown_purpose"}
}

# --- usable_as and obligations ---

test_belief_is_attributed if {
	d := ask(alice, private_belief)
	d.usable_as == "belief"
	d.obligations == {"attribute", "cite_source"}
}

test_belief_about_another_is_nested if {
	record := object.union(team_belief, {"observed_id": "bob", "observed_attitude": "knows", "modality": "reported_belief"})
	d := ask(bob, record)
	d.usable_as == "nested_belief"
	"attribute" in d.obligations
}

test_known_with_evidence_is_knowledge if {
	record := object.union(team_belief, {
		"modality": "known", "observed_id": "bob",
		"evidence": [{"kind": "acknowledgement", "by": "bob", "ref": "msg-9"}],
	})
	ask(bob, record).usable_as == "knowledge"
}

test_known_without_evidence_is_reporters_nested_belief if {
	record := object.union(team_belief, {"modality": "known", "observed_id": "bob"})
	d := ask(bob, record)
	d.usable_as == "nested_belief"
	"evidence_insufficient" in d.reasons
	d.allow
}

# docs/design.md §1: the extractor relays Alice's words ("Bob knows") with evidence that
# never names Bob. It stays Alice's belief about Bob.
relayed_claim_about_bob(item) := object.union(team_belief, {
	"modality": "known", "observed_id": "bob", "observed_attitude": "knows",
	"source": {"kind": "conversation", "speaker": "alice", "channel": "dm", "participants": ["alice"]},
	"evidence": [item],
})

test_relayed_words_with_an_unrelated_announcement_are_not_knowledge if {
	d := ask(alice, relayed_claim_about_bob({"kind": "announcement", "ref": "made-up"}))
	d.allow
	d.usable_as == "nested_belief"
	d.reasons == {"evidence_insufficient"}
}

test_change_record_not_naming_the_knower_is_not_knowledge if {
	d := ask(bob, relayed_claim_about_bob({"kind": "change_record", "ref": "CR-x"}))
	d.usable_as == "nested_belief"
	d.reasons == {"evidence_insufficient"}
}

test_announcement_that_reached_the_knower_is_knowledge if {
	d := ask(bob, relayed_claim_about_bob({"kind": "announcement", "ref": "all-hands-1", "by": "bob"}))
	d.usable_as == "knowledge"
	d.reasons == set()
}

test_holders_own_knowledge_from_a_change_record if {
	record := object.union(team_belief, {"modality": "known", "evidence": [{"kind": "change_record", "ref": "CR-7"}]})
	ask(bob, record).usable_as == "knowledge"
}

test_first_person_known_without_evidence_is_belief if {
	record := object.union(team_belief, {"modality": "known"})
	ask(bob, record).usable_as == "belief"
}

world_state := {
	"id": "w1",
	"tenant": "acme",
	"modality": "world_state",
	"source_id": "CR-7",
	"source": {"kind": "change_record"},
	"audience": ["group:launch-team"],
	"valid_at": "2026-10-01T00:00:00Z",
}

test_authoritative_current_world_state_is_fact if {
	d := ask(bob, world_state)
	d.usable_as == "fact"
	d.obligations == {"cite_source"}
}

test_world_state_without_authority_is_unverified if {
	d := ask(bob, object.union(world_state, {"source": {"kind": "conversation"}}))
	d.usable_as == "unverified_claim"
	d.obligations == {"attribute", "cite_source", "verify_before_acting"}
	d.reasons == {"not_authoritative"}
}

test_ended_world_state_is_not_fact if {
	record := object.union(world_state, {"invalid_at": "2026-11-01T00:00:00Z"})
	d := disclosure.single with input as {"asker": bob, "purpose": "history", "now": now, "record": record}
	d.usable_as == "unverified_claim"
}

# --- a fact is a fact at the instant asked about (as_of, default now) ---

# release-bot's change record: the launch is October 17, from October 1, until a
# later change record (from October 10) superseded it.
superseded_fact := object.union(world_state, {"invalid_at": "2026-10-10T00:00:00Z"})

ask_as_of(purpose, at, record) := decision if {
	decision := disclosure.single with input as {
		"asker": bob, "audience": [], "purpose": purpose, "now": now, "as_of": at, "record": record,
	}
}

test_past_recall_returns_what_was_a_fact_then if {
	d := ask_as_of("recall", "2026-10-05T00:00:00Z", superseded_fact)
	d.allow
	d.usable_as == "fact"
	d.obligations == {"cite_source"}
	d.reasons == set()
}

test_ended_authoritative_world_state_is_not_current_not_unauthoritative if {
	d := ask_as_of("history", now, superseded_fact)
	d.allow
	d.usable_as == "unverified_claim"
	d.obligations == {"attribute", "cite_source", "verify_before_acting"}
	d.reasons == {"not_current"}
}

test_world_state_not_yet_valid_at_as_of_is_not_current if {
	d := ask_as_of("get", "2026-09-01T00:00:00Z", world_state)
	d.usable_as == "unverified_claim"
	d.reasons == {"not_current"}
}

test_unauthoritative_ended_world_state_gives_both_notes if {
	record := object.union(superseded_fact, {"source": {"kind": "conversation"}})
	d := ask_as_of("history", now, record)
	d.usable_as == "unverified_claim"
	d.reasons == {"not_authoritative", "not_current"}
}

test_recall_past_its_end_is_denied_and_not_current if {
	d := ask_as_of("recall", "2026-10-20T00:00:00Z", superseded_fact)
	not d.allow
	d.reasons == {"not_valid_at_as_of", "not_current"}
}

test_without_as_of_now_is_the_instant if {
	d := disclosure.single with input as {"asker": bob, "purpose": "get", "now": "2026-10-05T00:00:00Z", "record": superseded_fact}
	d.usable_as == "fact"
}

test_recall_without_any_instant_is_denied if {
	# An input with neither now nor as_of has no instant to be valid at: deny.
	d := disclosure.single with input as {"asker": alice, "purpose": "recall", "record": private_belief}
	not d.allow
	"not_valid_at_as_of" in d.reasons
	not disclosure.applies(private_belief) with input as {"asker": alice, "purpose": "recall"}
}

test_world_state_without_any_instant_is_not_a_fact if {
	d := disclosure.single with input as {"asker": bob, "purpose": "get", "record": world_state}
	d.usable_as == "unverified_claim"
	"not_current" in d.reasons
}

announcement := {
	"id": "a1",
	"tenant": "acme",
	"observer_id": "carol",
	"modality": "common_knowledge",
	"source_id": "all-hands-2026-10-02",
	"source": {"kind": "announcement", "speaker": "carol", "channel": "all-hands"},
	"audience": ["group:launch-team"],
	"valid_at": "2026-10-02T00:00:00Z",
}

test_qualifying_announcement_is_common_knowledge if ask(bob, announcement).usable_as == "common_knowledge"

test_common_knowledge_of_an_unknown_group_is_only_a_belief if {
	record := object.union(announcement, {"audience": ["alice", "group:nosuchgroup"]})
	d := ask(alice, record)
	d.allow
	d.usable_as == "belief"
	d.reasons == {"announcement_not_qualifying"}
}

# C_G(p) holds only for a G the claim reaches in full: bob is in launch-team but not
# cleared for launch-core, so carol is not told "it is common knowledge".
test_common_knowledge_a_member_may_not_see_is_only_a_belief if {
	record := object.union(announcement, {"access_scope": "launch-core"})
	d := ask(carol, record)
	d.allow
	d.usable_as == "belief"
	d.reasons == {"common_knowledge_group_not_cleared"}
	not ask(bob, record).allow
}

test_common_knowledge_stops_when_an_uncleared_member_joins if {
	record := object.union(announcement, {"access_scope": "launch-core", "audience": ["group:core"]})
	ask(carol, record).usable_as == "common_knowledge" with data.whose.directory.tenants.acme.groups as {"core": ["alice", "carol"]}
	ask(carol, record).usable_as == "belief" with data.whose.directory.tenants.acme.groups as {"core": ["alice", "bob", "carol"]}
}

test_private_observations_are_not_common_knowledge if {
	record := object.union(announcement, {"source": {"kind": "conversation", "speaker": "carol"}})
	d := ask(bob, record)
	d.usable_as == "belief"
	"announcement_not_qualifying" in d.reasons
}

# --- explanation ---

explain(asker, record) := explanation if {
	explanation := disclosure.explanation with input as {
		"asker": asker,
		"audience": [],
		"purpose": "recall",
		"now": now,
		"record": record,
	}
}

rule_of(explanation, name) := [r.reasons | some r in explanation.rules; r.rule == name][0]

test_explanation_names_the_rule_behind_each_denial if {
	scoped := explain(bob, scoped_belief)
	scoped.decision == ask(bob, scoped_belief)
	rule_of(scoped, "data.whose.disclosure.denials.hearers") == ["scope_not_cleared:bob"]
	rule_of(scoped, "data.whose.disclosure.denials.instant") == []
	rule_of(scoped, "data.whose.disclosure.usable_as") == ["belief"]
	private := explain(bob, private_belief)
	rule_of(private, "data.whose.disclosure.denials.hearers") == ["audience_excludes:bob"]
	rule_of(private, "data.whose.disclosure.denials.asker") == []
}

test_explanation_lists_every_denial_rule if {
	names := {r.rule | some r in explain(bob, team_belief).rules}
	every name, _ in data.whose.disclosure.denials {
		sprintf("data.whose.disclosure.denials.%s", [name]) in names
	}
}

test_explanation_reasons_are_exactly_the_decision_reasons if {
	e := explain(carol, object.union(scoped_belief, {"tenant": "globex"}))
	explained := {reason | some r in e.rules; not r.rule in {"data.whose.disclosure.usable_as"}; some reason in r.reasons}
	explained == {reason | some reason in e.decision.reasons}
}

# --- a claim about someone's mind is at most its holder's view (docs/design.md §2) ---

# Stored before the write policy refused it (nested_belief_as_shared_claim):
# Alice's belief about Bob, relayed from an all-hands as common knowledge.
nested_announcement := object.union(announcement, {"observed_id": "bob", "observed_attitude": "believes"})

test_nested_belief_is_never_common_knowledge if {
	d := ask(carol, nested_announcement)
	d.allow
	d.usable_as == "nested_belief"
	d.obligations == {"attribute", "cite_source"}
	d.reasons == {"nested_belief_not_shared"}
}

test_nested_belief_is_never_a_fact if {
	d := ask(carol, object.union(world_state, {"observer_id": "alice", "observed_id": "bob"}))
	d.usable_as == "nested_belief"
	d.reasons == {"nested_belief_not_shared"}
}

test_nested_belief_is_never_an_unverified_claim if {
	record := object.union(world_state, {"observed_id": "bob", "source": {"kind": "conversation"}})
	d := ask(carol, record)
	d.usable_as == "nested_belief"
	d.obligations == {"attribute", "cite_source"}
	d.reasons == {"nested_belief_not_shared", "not_authoritative"}
}

test_unqualified_nested_announcement_gives_both_notes if {
	record := object.union(nested_announcement, {"source": {"kind": "conversation", "speaker": "carol"}})
	ask(carol, record).reasons == {"nested_belief_not_shared", "announcement_not_qualifying"}
}

# --- evidence counts at the instant asked about (as_of, default now) ---

# Bob acknowledged the date on October 20.
acknowledged_on_oct_20 := object.union(team_belief, {
	"modality": "known", "observed_id": "bob",
	"evidence": [{"kind": "acknowledgement", "by": "bob", "ref": "msg-9", "at": "2026-10-20T00:00:00Z"}],
})

test_evidence_dated_before_as_of_is_knowledge if {
	ask(bob, acknowledged_on_oct_20).usable_as == "knowledge"
	ask_as_of("recall", "2026-10-20T00:00:00Z", acknowledged_on_oct_20).usable_as == "knowledge"
}

test_evidence_dated_after_as_of_is_not_knowledge_then if {
	d := ask_as_of("recall", "2026-10-10T00:00:00Z", acknowledged_on_oct_20)
	d.allow
	d.usable_as == "nested_belief"
	d.reasons == {"evidence_insufficient"}
}

test_evidence_dated_after_now_is_not_knowledge if {
	d := disclosure.single with input as {"asker": bob, "purpose": "get", "now": "2026-10-10T00:00:00Z", "record": acknowledged_on_oct_20}
	d.usable_as == "nested_belief"
	d.reasons == {"evidence_insufficient"}
}

test_unparseable_evidence_date_is_not_knowledge if {
	record := object.union(acknowledged_on_oct_20, {"evidence": [{"kind": "acknowledgement", "by": "bob", "ref": "msg-9", "at": "soon"}]})
	ask(bob, record).usable_as == "nested_belief"
}

# --- perception: at most the witness's belief ---

witnessed(people) := [{"kind": "witnessed", "ref": "room-1", "by": who} | some who in people]

saw := {
	"id": "o1",
	"tenant": "acme",
	"observer_id": "alice",
	"modality": "observed",
	"source_id": "room-1",
	"source": {"kind": "perception", "participants": ["alice", "bob"]},
	"evidence": witnessed(["alice"]),
	"audience": ["alice"],
	"valid_at": "2026-10-01T00:00:00Z",
}

test_a_perception_is_its_holders_belief if {
	d := ask(alice, saw)
	d.usable_as == "belief"
	d.reasons == set()
	d.obligations == {"attribute", "cite_source"}
}

test_a_perception_of_anothers_perception_is_a_nested_belief if {
	about_bob := object.union(saw, {"observed_id": "bob", "observed_attitude": "believes", "audience": ["alice", "bob"]})
	ask(bob, about_bob).usable_as == "nested_belief"
}

test_a_perception_is_never_knowledge_whatever_it_cites if {
	cited := object.union(saw, {"evidence": [{"kind": "announcement", "ref": "all-hands-1", "by": "alice"}]})
	ask(alice, cited).usable_as == "belief"
}

witnessed_announcement := object.union(announcement, {
	"source": {"kind": "announcement", "speaker": "carol", "channel": "hallway", "participants": ["alice", "bob", "carol"]},
	"evidence": witnessed(["alice", "bob", "carol"]),
})

test_an_announcement_the_whole_group_witnessed_is_common_knowledge if {
	ask(bob, witnessed_announcement).usable_as == "common_knowledge"
}

# Dave joins the team after the announcement: he was not there, so it is no longer
# common knowledge in the team as it now is.
test_common_knowledge_stops_when_a_member_who_was_not_there_joins if {
	d := ask(bob, witnessed_announcement) with data.whose.directory.tenants.acme.groups as {"launch-team": ["alice", "bob", "carol", "dave"]}
	d.usable_as == "belief"
	d.reasons == {"announcement_not_qualifying"}
}

# --- what is worked out once per query ---

test_denied_by_id_gathers_every_rule_for_every_record if {
	got := disclosure.denied_by_id with input as {
		"asker": {"id": "bob", "tenant": "acme"},
		"audience": ["carol"],
		"purpose": "recall",
		"now": now,
		"records": [private_belief, team_belief, object.union(scoped_belief, {"valid_at": "2027-01-01T00:00:00Z"})],
	}
	got == {
		"r1": {"audience_excludes:bob", "audience_excludes:carol"},
		"r3": {"not_valid_at_as_of", "scope_not_cleared:bob"},
	}
}

test_as_of_ns_is_as_of_parsed if {
	disclosure.as_of_ns == 1796040000000000000 with input as {"now": now}
	disclosure.as_of_ns == 0 with input as {"now": now, "as_of": "1970-01-01T00:00:00Z"}
}

test_only_world_state_knowledge_and_common_knowledge_are_downgraded if {
	disclosure.notes(object.union(private_belief, {"observed_id": "bob"}), "nested_belief") == set()
	disclosure.notes({"modality": "known"}, "belief") == {"evidence_insufficient"}
}

# --- speech acts and nested views ---

statement := object.union(private_belief, {"id": "s1", "act": "said", "modality": "asserted"})

test_a_statement_is_a_speech_act_never_a_belief if {
	d := ask(alice, statement)
	d.allow
	d.usable_as == "statement"
	d.obligations == {"attribute", "cite_source"}
}

test_what_a_hearer_heard_is_neither_their_belief_nor_the_speakers if {
	heard := object.union(statement, {"observer_id": "bob", "observed_id": "alice", "act": "heard", "audience": ["bob"]})
	ask(bob, heard).usable_as == "heard"
}

test_a_statement_about_another_mind_is_a_nested_belief if {
	about_bob := object.union(statement, {"observed_id": "bob", "observed_attitude": "knows"})
	ask(alice, about_bob).usable_as == "nested_belief"
}

test_a_view_nested_deeper_than_one_mind_is_never_knowledge if {
	# Alice's view of Bob's view of Carol's knowledge, with Carol's acknowledgement:
	# still Alice's view, never Carol's knowledge.
	deep := object.union(private_belief, {
		"id": "n2",
		"modality": "known",
		"observed_id": "bob",
		"observed_path": ["bob", "carol"],
		"observed_attitude": "knows",
		"evidence": [{"kind": "acknowledgement", "ref": "ack-1", "by": "carol"}],
	})
	ask(alice, deep).usable_as == "nested_belief"
}

# --- grants (whose.disclosure.granted) ---

# Alice's appointment, hers alone to read; her grant lets her sister Beth see it.
appointment := object.union(private_belief, {"id": "r9", "categories": ["appointments"]})

to_beth := {
	"id": "g1",
	"tenant": "acme",
	"subject": "alice",
	"reader": "beth",
	"categories": ["appointments"],
	"since": "2026-11-01T00:00:00Z",
	"until": "2026-12-04T23:59:59Z",
}

beth := {"id": "beth", "tenant": "acme"}

granted_to(asker, audience, purpose, given, record) := decision if {
	decision := disclosure.single with input as {
		"asker": asker,
		"audience": audience,
		"purpose": purpose,
		"now": now,
		"grants": given,
		"record": record,
	}
}

test_a_live_grant_discloses_the_subjects_records_of_its_categories if {
	granted_to(beth, [], "recall", [to_beth], appointment).allow
	not granted_to(beth, [], "recall", [], appointment).allow
}

test_a_grant_reaches_no_other_category_subject_reader_or_tenant if {
	clinical := object.union(appointment, {"categories": ["clinical"]})
	not granted_to(beth, [], "recall", [to_beth], clinical).allow
	not granted_to(beth, [], "recall", [to_beth], object.remove(appointment, ["categories"])).allow
	bobs := object.union(appointment, {"observer_id": "bob", "source": {"kind": "conversation", "speaker": "bob"}})
	not granted_to(beth, [], "recall", [to_beth], bobs).allow
	not granted_to(carol, [], "recall", [to_beth], appointment).allow
	not granted_to(beth, [], "recall", [object.union(to_beth, {"tenant": "other"})], appointment).allow
}

# Bob told Alice in private: her memory of it is hers, but his words are not hers to
# grant away; nor is her view of what Bob believes.
test_a_grant_reaches_no_record_that_concerns_another_person if {
	told := object.union(appointment, {"source": {"kind": "conversation", "speaker": "bob"}})
	not granted_to(beth, [], "recall", [to_beth], told).allow
	modelled := object.union(appointment, {"observed_id": "bob"})
	not granted_to(beth, [], "recall", [to_beth], modelled).allow
	own_words := object.union(appointment, {"source": {"kind": "conversation", "speaker": "alice"}})
	granted_to(beth, [], "recall", [to_beth], own_words).allow
}

test_a_grant_for_one_purpose_serves_that_purpose_only if {
	for_recall := object.union(to_beth, {"purpose": "recall"})
	granted_to(beth, [], "recall", [for_recall], appointment).allow
	not granted_to(beth, [], "history", [for_recall], appointment).allow
}

test_a_grant_to_a_group_covers_its_members if {
	to_family := object.union(to_beth, {"reader": "group:family"})
	granted_to(object.union(beth, {"groups": ["family"]}), [], "recall", [to_family], appointment).allow
	not granted_to(beth, [], "recall", [to_family], appointment).allow
}

test_a_grant_does_not_clear_a_scope if {
	scoped := object.union(appointment, {"access_scope": "launch-core"})
	not granted_to(beth, [], "recall", [to_beth], scoped).allow
}

test_every_hearer_needs_a_right_of_their_own if {
	not granted_to(alice, ["beth", "carol"], "recall", [to_beth], appointment).allow
	granted_to(alice, ["beth"], "recall", [to_beth], appointment).allow
}
