package whose.ingest_test

import data.whose.ingest

alice := {"id": "alice", "tenant": "acme"}

bob := {"id": "bob", "tenant": "acme"}

belief := {
	"id": "r1",
	"tenant": "acme",
	"observer_id": "alice",
	"modality": "reported_belief",
	"source_id": "private-session-42",
	"source": {"kind": "conversation", "speaker": "alice"},
	"audience": ["alice"],
	"valid_at": "2026-10-01T00:00:00Z",
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
	d.reasons == {"observer_not_speaker", "writer_not_holder"}
}

test_relay_without_speaker_refused if {
	record := object.union(object.remove(belief, ["source"]), {"observer_id": "bob", "source": {"kind": "document"}})
	write(extractor, record).reasons == {"relay_without_speaker"}
}

test_extractor_cannot_flatten_either if {
	d := write({"id": "extractor-bot", "tenant": "acme"}, object.union(belief, {"observer_id": "bob"}))
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
	# Relayed, but the acknowledgement is Alice's, not the knower's.
	record := object.union(belief, {
		"modality": "known", "observed_id": "bob",
		"evidence": [{"kind": "acknowledgement", "by": "alice", "ref": "msg-1"}],
	})
	write({"id": "extractor-bot", "tenant": "acme"}, record).reasons == {"known_without_evidence"}
}

extractor := {"id": "extractor-bot", "tenant": "acme"}

acknowledged := object.union(belief, {
	"modality": "known", "observed_id": "bob",
	"evidence": [{"kind": "acknowledgement", "by": "bob", "ref": "msg-9"}],
})

test_known_with_evidence_relayed_by_extractor_allowed if write(extractor, acknowledged).allow

test_citing_someone_elses_acknowledgement_refused if {
	write(alice, acknowledged).reasons == {"evidence_needs_relay"}
}

test_citing_own_acknowledgement_refused if {
	own := object.union(object.remove(acknowledged, ["observed_id", "source"]), {
		"observer_id": "bob",
		"source": {"kind": "conversation", "speaker": "bob"},
	})
	write({"id": "bob", "tenant": "acme"}, own).reasons == {"evidence_needs_relay"}
}

test_citing_a_change_record_needs_authority if {
	record := object.union(belief, {"modality": "known", "evidence": [{"kind": "change_record", "ref": "CR-7"}]})
	write(alice, record).reasons == {"evidence_needs_role"}
	write({"id": "alice", "tenant": "acme", "roles": ["authority"]}, record).allow
}

# docs/design.md §1 at write time: the extractor relays Alice's words ("Bob knows") with
# evidence that never names Bob. Alice's words cannot become Bob's knowledge.
relayed_claim_about_bob(item) := object.union(belief, {
	"modality": "known", "observed_id": "bob", "observed_attitude": "knows",
	"source": {"kind": "conversation", "speaker": "alice", "channel": "dm", "participants": ["alice"]},
	"evidence": [item],
})

test_relayed_words_with_an_unrelated_announcement_refused if {
	d := write(extractor, relayed_claim_about_bob({"kind": "announcement", "ref": "made-up"}))
	d.reasons == {"known_without_evidence"}
}

test_relayed_words_with_an_unrelated_change_record_refused if {
	relay_and_authority := {"id": "svc", "tenant": "acme", "roles": ["extractor", "authority"]}
	d := write(relay_and_authority, relayed_claim_about_bob({"kind": "change_record", "ref": "CR-x"}))
	d.reasons == {"known_without_evidence"}
}

test_authority_cannot_make_someone_know_without_naming_them if {
	release_bot := {"id": "release-bot", "tenant": "acme"}
	own := object.union(object.remove(belief, ["source"]), {
		"observer_id": "release-bot", "observed_id": "bob", "observed_attitude": "knows",
		"modality": "known", "source": {"kind": "change_record"},
		"evidence": [{"kind": "change_record", "ref": "CR-x"}],
	})
	write(release_bot, own).reasons == {"known_without_evidence"}
	named := object.union(own, {"evidence": [{"kind": "change_record", "ref": "CR-x", "by": "bob"}]})
	write(release_bot, named).allow
}

test_announcement_that_reached_the_knower_relayed_by_extractor_allowed if {
	write(extractor, relayed_claim_about_bob({"kind": "announcement", "ref": "all-hands-1", "by": "bob"})).allow
}

test_common_knowledge_of_an_unknown_group_refused if {
	d := write(extractor, object.union(announced, {"audience": ["alice", "group:nosuchgroup"]}))
	d.reasons == {"common_knowledge_without_announcement"}
}

test_common_knowledge_of_a_token_only_group_refused if {
	# The writer's token says it is in "ops"; the directory has no such group.
	d := write(object.union(extractor, {"groups": ["ops"]}), object.union(announced, {"audience": ["group:ops"]}))
	d.reasons == {"common_knowledge_without_announcement"}
}

test_common_knowledge_without_announcement_refused if {
	d := write(alice, object.union(belief, {"modality": "common_knowledge", "audience": ["group:launch-team"]}))
	d.reasons == {"common_knowledge_without_announcement"}
}

announced := object.union(belief, {
	"modality": "common_knowledge",
	"source": {"kind": "announcement", "speaker": "alice", "channel": "all-hands"},
	"audience": ["group:launch-team"],
})

test_common_knowledge_from_announcement_relayed_by_extractor_allowed if write(extractor, announced).allow

test_announcement_needs_a_role_to_write if write(alice, announced).reasons == {"source_needs_role"}

# bob is in launch-team but not cleared for launch-core: C_G(p) cannot hold for G.
test_common_knowledge_to_a_group_with_an_uncleared_member_refused if {
	d := write(extractor, object.union(announced, {"access_scope": "launch-core"}))
	d.reasons == {"common_knowledge_group_not_cleared"}
}

# --- whether the writer may read what it writes ---

test_a_writer_in_the_audience_reads_what_it_writes if write(alice, belief).readable

test_a_relay_storing_a_private_conversation_cannot_read_it if {
	d := write(extractor, object.union(belief, {"audience": ["alice"]}))
	d.allow
	not d.readable
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
	d.reasons == {"source_needs_role"}
}

test_authoritative_source_allowed_for_directory_authority if write({"id": "release-bot", "tenant": "acme"}, change_record).allow

test_authoritative_source_allowed_for_token_authority if write({"id": "dave", "tenant": "acme", "roles": ["authority"]}, change_record).allow

test_unverified_world_state_allowed_for_anyone if {
	write(alice, object.union(change_record, {"source": {"kind": "conversation"}})).allow
}

# --- holder and scope ---

test_writing_someone_elses_belief_refused if {
	record := object.union(belief, {"observer_id": "bob", "source": {"kind": "conversation", "speaker": "bob"}})
	write(alice, record).reasons == {"writer_not_holder"}
}

test_extractor_may_relay_a_speakers_belief if {
	record := object.union(belief, {"observer_id": "bob", "source": {"kind": "conversation", "speaker": "bob"}, "audience": ["bob"]})
	write({"id": "extractor-bot", "tenant": "acme"}, record).allow
}

test_relay_role_from_token_claim if {
	record := object.union(belief, {"observer_id": "bob", "source": {"kind": "conversation", "speaker": "bob"}})
	write({"id": "svc", "tenant": "acme", "roles": ["extractor"]}, record).allow
}

test_scope_not_held_refused if {
	bob := {"id": "bob", "tenant": "acme"}
	record := object.union(belief, {"observer_id": "bob", "source": {"kind": "conversation", "speaker": "bob"}, "access_scope": "launch-core"})
	write(bob, record).reasons == {"scope_not_held"}
}

test_scope_held_allowed if write(alice, object.union(belief, {"access_scope": "launch-core"})).allow

# --- derived records ---

team_premise := object.union(belief, {"id": "p1", "audience": ["group:launch-team"]})

private_premise := object.union(belief, {"id": "p2", "audience": ["alice"]})

scoped_premise := object.union(belief, {"id": "p3", "audience": ["group:launch-team"], "access_scope": "launch-core"})

summary(audience, derived_from) := object.union(belief, {
	"id": "s1",
	"audience": audience,
	"provenance": {"derived_from": derived_from},
})

derive(record, premises) := decision if {
	decision := ingest.decision with input as {"writer": alice, "record": record, "premises": premises}
}

test_summary_within_its_premises_audience_allowed if {
	derive(summary(["group:launch-team"], ["p1"]), [team_premise]).allow
}

test_summary_narrower_than_premises_allowed if {
	shared := object.union(belief, {"id": "p4", "audience": ["alice", "bob"]})
	derive(summary(["alice"], ["p4", "p2"]), [shared, private_premise]).allow
}

# Alice is in launch-team today; if she left it, a summary naming her would still
# reach her though its premise no longer does. Entries must appear in the premise.
test_summary_naming_a_member_where_the_premise_names_the_group_refused if {
	d := derive(summary(["alice"], ["p1"]), [team_premise])
	d.reasons == {"derived_audience_wider:alice"}
}

# A grant reaches records by category: a derivation carries none, so no grant
# widens it past its premises.
test_summary_with_categories_refused if {
	d := derive(object.union(summary(["group:launch-team"], ["p1"]), {"categories": ["work"]}), [team_premise])
	d.reasons == {"derived_with_categories"}
}

test_summary_wider_than_a_premise_refused if {
	d := derive(summary(["group:launch-team"], ["p1", "p2"]), [team_premise, private_premise])
	d.reasons == {"derived_audience_wider:group:launch-team"}
}

test_summary_naming_an_outsider_refused if {
	d := derive(summary(["alice", "bob"], ["p2"]), [private_premise])
	d.reasons == {"derived_audience_wider:bob"}
}

test_summary_dropping_a_premises_scope_refused if {
	d := derive(summary(["group:launch-team"], ["p3"]), [scoped_premise])
	d.reasons == {"derived_scope_wider"}
}

test_summary_changing_a_premises_scope_refused if {
	record := object.union(summary(["group:launch-team"], ["p3"]), {"access_scope": "board"})
	d := derive(record, [scoped_premise])
	"derived_scope_wider" in d.reasons
}

test_summary_keeping_a_premises_scope_allowed if {
	record := object.union(summary(["group:launch-team"], ["p3"]), {"access_scope": "launch-core"})
	derive(record, [scoped_premise]).allow
}

test_missing_premise_refused if {
	d := derive(summary(["alice"], ["p9"]), [])
	d.reasons == {"premise_unavailable"}
}

test_premise_the_writer_cannot_read_refused if {
	bobs := object.union(belief, {"id": "p4", "observer_id": "bob", "audience": ["bob"]})
	d := derive(summary(["alice"], ["p4"]), [bobs])
	d.reasons == {"premise_unavailable"}
}

test_premise_of_another_tenant_refused if {
	foreign := object.union(team_premise, {"tenant": "globex"})
	d := derive(summary(["alice"], ["p1"]), [foreign])
	"premise_unavailable" in d.reasons
}

# --- a claim about someone's mind is never a shared claim (docs/design.md §2) ---

# The extractor relays Alice's "Bob believes p" from an all-hands as common
# knowledge in a group containing Bob: that would say Bob knows p.
test_nested_belief_as_common_knowledge_refused if {
	nested := object.union(announced, {"observed_id": "bob", "observed_attitude": "believes"})
	write(extractor, nested).reasons == {"nested_belief_as_shared_claim"}
}

test_nested_belief_as_world_state_refused if {
	nested := object.union(change_record, {"observed_id": "bob", "observed_attitude": "knows"})
	write({"id": "release-bot", "tenant": "acme"}, nested).reasons == {"nested_belief_as_shared_claim"}
}

test_nested_belief_as_known_is_not_refused_for_being_nested if {
	# "Bob knows p" with evidence tied to Bob is the knowledge rule's business.
	not "nested_belief_as_shared_claim" in write(extractor, acknowledged).reasons
	write(extractor, acknowledged).allow
}

# --- world state in someone else's words is a relay (docs/design.md §2: whose words) ---

# Alice (no roles) writes "the launch moved" as world state, citing a
# conversation where Bob spoke: she is putting words in Bob's mouth.
hearsay := {
	"id": "w2",
	"tenant": "acme",
	"modality": "world_state",
	"source_id": "standup-3",
	"source": {"kind": "conversation", "speaker": "bob", "channel": "standup"},
	"audience": ["carol"],
	"valid_at": "2026-10-01T00:00:00Z",
}

test_world_state_in_someone_elses_words_needs_a_relay if {
	write(alice, hearsay).reasons == {"writer_not_holder"}
	write(extractor, hearsay).allow
}

test_world_state_in_the_writers_own_words_allowed if {
	write({"id": "bob", "tenant": "acme"}, hearsay).allow
}

test_unattributed_world_state_is_the_writers_own if {
	write(alice, object.union(object.remove(hearsay, ["source"]), {"source": {"kind": "conversation"}})).allow
}

test_world_state_held_by_the_writer_but_spoken_by_another_refused if {
	d := write(alice, object.union(hearsay, {"observer_id": "alice"}))
	d.reasons == {"observer_not_speaker"}
}

test_voice if {
	ingest.voice({"observer_id": "alice", "source": {"speaker": "bob"}}) == "alice"
	ingest.voice({"source": {"speaker": "bob"}}) == "bob"
	not ingest.voice({"source": {"kind": "conversation"}})
}

# --- evidence dated after valid_at does not make the record known from valid_at ---

acknowledged_at(at) := object.union(acknowledged, {"evidence": [{"kind": "acknowledgement", "by": "bob", "ref": "msg-9", "at": at}]})

test_evidence_dated_before_valid_at_allowed if {
	write(extractor, acknowledged_at("2026-09-30T00:00:00Z")).allow
	write(extractor, acknowledged_at("2026-10-01T00:00:00Z")).allow
}

test_evidence_dated_after_valid_at_refused if {
	write(extractor, acknowledged_at("2026-10-02T00:00:00Z")).reasons == {"known_without_evidence"}
}

test_unparseable_evidence_date_refused if {
	write(extractor, acknowledged_at("last week")).reasons == {"known_without_evidence"}
}

test_known_without_valid_at_refused if {
	# The sidecar always sets valid_at; a record without one has no instant to know at.
	write(extractor, object.remove(acknowledged, ["valid_at"])).reasons == {"known_without_evidence"}
}

# --- perception (modality observed): what its holder witnessed ---

witnessed(people) := [{"kind": "witnessed", "ref": "room-1", "by": who, "at": "2026-10-01T00:00:00Z"} | some who in people]

# Sally saw the marble put in the basket; Anne was there too.
saw := {
	"id": "o1",
	"tenant": "acme",
	"observer_id": "sally",
	"modality": "observed",
	"source_id": "room-1",
	"source": {"kind": "perception", "participants": ["sally", "anne"]},
	"evidence": witnessed(["sally"]),
	"audience": ["sally"],
	"valid_at": "2026-10-01T00:00:00Z",
	"provenance": {"method": "witnessed"},
}

# Sally's belief that Anne saw it too.
saw_anne_see := object.union(saw, {
	"id": "o2",
	"observed_id": "anne",
	"observed_attitude": "believes",
	"evidence": witnessed(["sally", "anne"]),
	"audience": ["sally", "anne"],
})

test_a_relay_records_what_each_witness_saw if {
	write(extractor, saw).allow
	write(extractor, saw_anne_see).allow

	# Nobody said it: a perception needs no speaker (relay_without_speaker is for words).
	not write(extractor, saw).readable
}

test_perception_by_someone_who_was_not_there_refused if {
	carol_saw := object.union(saw, {"observer_id": "carol", "evidence": witnessed(["carol"])})
	write(extractor, carol_saw).reasons == {"perception_holder_absent"}
	uncited := object.union(saw, {"evidence": []})
	write(extractor, uncited).reasons == {"perception_holder_absent"}
}

test_a_view_of_someone_who_was_not_there_refused if {
	about_carol := object.union(saw_anne_see, {"observed_id": "carol", "evidence": witnessed(["sally", "carol"])})
	write(extractor, about_carol).reasons == {"perception_observed_absent"}
	uncited := object.union(saw_anne_see, {"evidence": witnessed(["sally"])})
	write(extractor, uncited).reasons == {"perception_observed_absent"}
}

test_only_a_relay_records_perception if {
	# Sally's own "I saw it" is something she says (asserted), not a perception record.
	write({"id": "sally", "tenant": "acme"}, saw).reasons == {"source_needs_role", "evidence_needs_role", "presence_not_attested"}
	d := write({"id": "anne", "tenant": "acme"}, object.union(saw, {"source": {"kind": "conversation", "participants": ["sally", "anne"]}, "evidence": []}))
	d.reasons == {"writer_not_holder", "perception_holder_absent", "perception_recorded_by_a_participant", "presence_not_attested"}
}

# A relay that was itself in the room is a participant: it records its own
# perception, never anyone else's.
test_a_participant_never_records_perception_for_others if {
	robot := {"id": "robot", "tenant": "acme", "roles": ["extractor"]}
	present := {"source": {"kind": "perception", "participants": ["sally", "anne", "robot"]}}
	write(robot, object.union(saw, present)).reasons == {"perception_recorded_by_a_participant"}
	own := object.union(saw, object.union(present, {"observer_id": "robot", "evidence": witnessed(["robot"]), "audience": ["robot"]}))
	write(robot, own).allow
}

# --- common knowledge from a witnessed announcement, on any channel ---

witnessed_announcement := object.union(announced, {
	"source": {"kind": "announcement", "speaker": "alice", "channel": "hallway", "participants": ["alice", "bob", "carol"]},
	"evidence": witnessed(["alice", "bob", "carol"]),
	"provenance": {"method": "witnessed"},
})

test_common_knowledge_from_an_announcement_the_whole_group_witnessed_allowed if {
	write(extractor, witnessed_announcement).allow
}

test_common_knowledge_from_an_announcement_a_member_missed_refused if {
	missed := object.union(witnessed_announcement, {
		"source": {"participants": ["alice", "carol"]},
		"evidence": witnessed(["alice", "carol"]),
	})
	write(extractor, missed).reasons == {"common_knowledge_member_absent"}
}

test_common_knowledge_witnessed_by_a_group_with_an_uncleared_member_refused if {
	scoped := object.union(witnessed_announcement, {"access_scope": "launch-core"})
	write(extractor, scoped).reasons == {"common_knowledge_group_not_cleared"}
}

# --- nested views: a chain of minds (observed_path) ---

test_a_nested_perception_needs_everyone_in_the_chain_there if {
	# Sally saw Anne see Sally see it: both were there, their witnessing cited.
	nested := object.union(saw_anne_see, {"observed_path": ["anne", "sally"]})
	write(extractor, nested).allow
	about_carol := object.union(saw_anne_see, {"observed_path": ["anne", "carol"]})
	write(extractor, about_carol).reasons == {"perception_observed_absent"}
}

test_a_group_is_not_a_mind if {
	about_team := object.union(belief, {"observed_id": "group:launch-team", "observed_attitude": "knows"})
	write(alice, about_team).reasons == {"observed_is_a_group"}
	deeper := object.union(belief, {"observed_id": "bob", "observed_path": ["bob", "group:launch-team"]})
	write(alice, deeper).reasons == {"observed_is_a_group"}
}

# --- speech acts: statements, what a hearer heard, what a hearer was told ---

said := object.union(belief, {"act": "said", "modality": "asserted", "source": {"kind": "conversation", "speaker": "alice", "participants": ["alice", "bob"]}})

# Alice's own record of what she said, naming nobody else as there.
said_alone := object.union(said, {"source": {"participants": ["alice"]}})

heard := object.union(said, {"observer_id": "bob", "observed_id": "alice", "act": "heard", "audience": ["bob"]})

told := object.union(object.remove(said, ["act"]), {
	"observer_id": "bob",
	"modality": "believed",
	"audience": ["bob"],
	"source": {"kind": "testimony", "speaker": "alice", "participants": ["alice", "bob"]},
	"provenance": {"method": "testimony"},
})

test_a_statement_is_its_speakers if {
	write(alice, said_alone).allow
	write(extractor, said).allow
	unspoken := object.union(object.remove(said, ["source"]), {"source": {"kind": "conversation"}})
	write(alice, unspoken).reasons == {"statement_without_speaker"}
	write(extractor, object.union(said, {"observer_id": "bob"})).reasons == {"observer_not_speaker"}
}

test_what_a_hearer_heard_names_the_speaker if {
	write(extractor, heard).allow

	# The hearer records it themselves only as the one there (presence, below).
	write(bob, object.union(heard, {"source": {"participants": ["bob"]}})).allow
	write(bob, heard).reasons == {"presence_not_attested"}
	write(extractor, object.union(heard, {"observed_id": "carol"})).reasons == {"heard_from_someone_else"}
	absent := object.union(object.remove(heard, ["source"]), {"source": {"kind": "conversation", "speaker": "alice", "participants": ["alice"]}})
	write(extractor, absent).reasons == {"hearer_absent"}
}

test_what_a_hearer_was_told_is_theirs_only_from_a_speaker_who_told_them if {
	write(extractor, told).allow
	unspoken := object.union(object.remove(told, ["source"]), {"source": {"kind": "testimony", "participants": ["alice", "bob"]}})
	write(extractor, unspoken).reasons == {"told_without_speaker", "relay_without_speaker"}
	oneself := object.union(object.remove(told, ["source"]), {"source": {"kind": "testimony", "speaker": "bob", "participants": ["bob"]}})
	write(extractor, oneself).reasons == {"told_by_oneself"}
	write(extractor, object.union(told, {"observer_id": "carol", "audience": ["carol"]})).reasons == {"hearer_absent"}

	# Anyone but a relay writes only their own: alice cannot make bob believe her.
	write(alice, told).reasons == {"writer_not_holder", "presence_not_attested"}
}

# --- presence is attested (issue 35): who may say who else was there ---

# Naming Bob among the participants puts "bob heard alice say ..." in Bob's memory:
# only a writer holding a role config.attestation.presence names may name others.
test_a_writer_may_always_say_they_were_there if {
	write(alice, said_alone).allow
	write(alice, object.union(said, {"source": {"participants": []}})).allow
	write(alice, belief).allow
}

test_a_plain_writer_naming_someone_else_present_refused if {
	write(alice, said).reasons == {"presence_not_attested"}
	write(alice, object.union(said, {"source": {"participants": ["bob"]}})).reasons == {"presence_not_attested"}

	# The unnoticed are people too: naming one is saying they were there.
	unseen := object.union(said_alone, {"source": {"unnoticed": ["bob"]}})
	write(alice, unseen).reasons == {"presence_not_attested"}
	write(extractor, unseen).allow
}

test_an_extractor_attests_presence if {
	write(extractor, said).allow
	write({"id": "svc", "tenant": "acme", "roles": ["extractor"]}, said).allow
}

test_the_roles_that_attest_presence_are_config if {
	scribe := {"id": "scribe", "tenant": "acme", "roles": ["scribe"]}
	write(scribe, said).reasons == {"writer_not_holder", "presence_not_attested"}
	write(scribe, said).reasons == {"writer_not_holder"} with data.whose.config.attestation.presence as ["scribe"]
	write(extractor, said).reasons == {"presence_not_attested"} with data.whose.config.attestation.presence as ["scribe"]
	write(object.union(alice, {"roles": ["scribe"]}), said).allow with data.whose.config.attestation.presence as ["scribe"]
}

test_a_config_without_presence_roles_leaves_it_to_the_extractor if {
	unset := object.remove(data.whose.config.attestation, ["presence"])
	write(extractor, said).allow with data.whose.config.attestation as unset
	write(alice, said).reasons == {"presence_not_attested"} with data.whose.config.attestation as unset
}

test_categories_of_the_tenant_vocabulary_only if {
	appointment := object.union(belief, {"categories": ["appointments"]})
	write(alice, appointment).allow with data.whose.config.consent as {"categories": ["appointments"]}
	pin := object.union(belief, {"categories": ["appointments", "pin"]})
	d := write(alice, pin) with data.whose.config.consent as {"categories": ["appointments"]}
	d.reasons == {"unknown_category:pin"}
}
