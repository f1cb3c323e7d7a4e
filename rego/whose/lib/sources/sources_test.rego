package whose.lib.sources_test

import data.whose.lib.sources

test_change_record_is_authoritative if sources.authoritative({"source": {"kind": "change_record"}})

test_conversation_is_not_authoritative if not sources.authoritative({"source": {"kind": "conversation"}})

test_missing_source_is_not_authoritative if not sources.authoritative({})

announcement := {
	"tenant": "acme",
	"source": {"kind": "announcement", "channel": "all-hands"},
	"audience": ["group:launch-team"],
}

test_group_announcement_on_qualifying_channel if sources.qualifying_announcement(announcement)

test_announcement_on_other_channel_does_not_qualify if not sources.qualifying_announcement(object.union(announcement, {
	"source": {"kind": "announcement", "channel": "dm"},
}))

test_announcement_to_individuals_does_not_qualify if not sources.qualifying_announcement(object.union(announcement, {
	"audience": ["alice", "bob", "carol"],
}))

test_conversation_does_not_qualify if not sources.qualifying_announcement(object.union(announcement, {
	"source": {"kind": "conversation", "channel": "all-hands"},
}))

# --- common knowledge is of a group the tenant's directory defines ---

test_announcement_to_an_unknown_group_does_not_qualify if {
	not sources.qualifying_announcement(object.union(announcement, {"audience": ["alice", "group:nosuchgroup"]}))
}

test_announcement_to_a_real_and_an_unknown_group_does_not_qualify if {
	not sources.qualifying_announcement(object.union(announcement, {"audience": ["group:launch-team", "group:nosuchgroup"]}))
}

test_announcement_to_another_tenants_group_does_not_qualify if {
	not sources.qualifying_announcement(object.union(announcement, {"tenant": "globex"}))
}

test_announcement_without_tenant_does_not_qualify if {
	not sources.qualifying_announcement(object.remove(announcement, ["tenant"]))
}

test_announcement_with_individuals_besides_the_group_qualifies if {
	sources.qualifying_announcement(object.union(announcement, {"audience": ["dave", "group:launch-team"]}))
}

test_groups_live_in_directory_data if {
	# Even a group with no members yet is a group once the directory defines it.
	sources.qualifying_announcement(object.union(announcement, {"audience": ["group:ops"]})) with data.whose.directory.tenants.acme.groups as {"ops": []}
}

test_audience_groups if {
	sources.audience_groups({"audience": ["alice", "group:launch-team", "group:ops"]}) == {"launch-team", "ops"}
	sources.audience_groups({"audience": ["alice"]}) == set()
}

test_shared_claim_about_another_mind if sources.shared_claim_about_another({"observed_id": "bob", "modality": "common_knowledge"})

test_world_state_about_another_mind if sources.shared_claim_about_another({"observed_id": "bob", "modality": "world_state"})

test_nested_belief_is_not_a_shared_claim if not sources.shared_claim_about_another({"observed_id": "bob", "modality": "believed"})

test_shared_claim_without_observed_is_not_about_another if not sources.shared_claim_about_another({"modality": "common_knowledge"})

# --- common knowledge reaches every member of its groups ---

scoped_announcement := object.union(announcement, {"access_scope": "launch-core"})

test_an_unscoped_announcement_reaches_every_member if sources.reaches_every_member(announcement)

test_a_scoped_announcement_misses_an_uncleared_member if {
	# bob is in launch-team but not cleared for launch-core.
	not sources.reaches_every_member(scoped_announcement)
}

test_a_scoped_announcement_reaches_a_group_all_cleared if {
	sources.reaches_every_member(scoped_announcement) with data.whose.directory.tenants.acme.groups as {"launch-team": ["alice", "carol"]}
}

# --- witnessed announcements ---

witnessing(people) := [{"kind": "witnessed", "ref": "room-1", "by": who} | some who in people]

# Carol announces in the hallway (no qualifying channel) to the whole launch team.
hallway := {
	"tenant": "acme",
	"source": {"kind": "announcement", "channel": "hallway", "participants": ["alice", "bob", "carol"]},
	"audience": ["group:launch-team"],
	"evidence": witnessing(["alice", "bob", "carol"]),
}

test_announcement_witnessed_by_every_member if {
	sources.witnessed_announcement(hallway)
	sources.announced_to_group(hallway)
	not sources.qualifying_announcement(hallway)
	not sources.member_absent(hallway)
}

test_announcement_with_a_member_absent_is_not_witnessed_by_the_group if {
	record := object.union(hallway, {"source": {"participants": ["alice", "carol"]}, "evidence": witnessing(["alice", "carol"])})
	not sources.witnessed_announcement(record)
	not sources.announced_to_group(record)
	sources.member_absent(record)
}

test_presence_needs_both_participation_and_cited_witnessing if {
	# Listed as present without their witnessing cited, or cited without being listed.
	not sources.witnessed_announcement(object.union(hallway, {"evidence": witnessing(["alice", "carol"])}))
	not sources.witnessed_announcement(object.union(hallway, {"source": {"participants": ["alice", "carol"]}}))
	not sources.witnessed(hallway, "dave")
	sources.witnessed(hallway, "bob")
}

test_only_witnessing_evidence_counts_as_presence if {
	acknowledged := [{"kind": "acknowledgement", "ref": "room-1", "by": who} | some who in ["alice", "bob", "carol"]]
	not sources.witnessed_announcement(object.union(hallway, {"evidence": acknowledged}))
}

test_a_witnessed_conversation_is_no_announcement if {
	record := object.union(hallway, {"source": {"kind": "conversation"}})
	not sources.witnessed_announcement(record)
	not sources.member_absent(record)
}

test_a_witnessed_announcement_needs_directory_groups if {
	not sources.witnessed_announcement(object.union(hallway, {"audience": ["alice", "bob", "carol"]}))
	not sources.witnessed_announcement(object.union(hallway, {"audience": ["group:launch-team", "group:nosuchgroup"]}))
}

test_an_announcement_without_witnessing_has_nobody_absent if {
	not sources.member_absent(object.remove(hallway, ["evidence"]))
}
