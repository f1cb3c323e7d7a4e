# METADATA
# scope: package
# description: |
#   Ingest: may this record be stored as written?
#
#   The write path's job is to keep points of view apart: a statement by Alice
#   may create Alice's belief, never Bob's belief or knowledge, and never a fact.
#   Input: {writer, record, premises} for one record, or {writer, records,
#   premises} for a batch; `decisions` applies `decision` to each record.
# schemas:
#   - input: schema.ingest_input
#   - data.whose.config: schema.config
#   - data.whose.directory: schema.directory
package whose.ingest

import data.whose.config
import data.whose.lib.categories
import data.whose.lib.directory
import data.whose.lib.evidence
import data.whose.lib.sources
import data.whose.lib.visibility

# METADATA
# description: one decision per record of a batch, keyed by record id.
# entrypoint: true
decisions := {record.id: decide(record) | some record in input.records}

# METADATA
# description: the single-record rule (input.record).
decision := decide(input.record)

# METADATA
# description: |
#   The decision for one record.
#   `readable`: whether the writer may see the record it writes. A writer that may
#   not (a relay storing a private conversation) is told nothing about the records
#   stored beside it: the sidecar keeps their links out of its answer.
decide(record) := {
	"allow": allow(record),
	"reasons": denials(record),
	"readable": readable_by_writer(record),
}

default readable_by_writer(_) := false

readable_by_writer(record) if visibility.visible_to(record, input.writer)

default allow(_) := false

# METADATA
# description: allowed only when no rule refuses.
allow(record) if count(denials(record)) == 0

# METADATA
# description: every reason the record is refused (empty means allow).
denials(record) := union({
	writer_denials,
	tenant_denials(record),
	audience_denials(record),
	speaker_denials(record),
	nested_denials(record),
	evidence_denials(record),
	announcement_denials(record),
	attestation_denials(record),
	holder_denials(record),
	scope_denials(record),
	derivation_denials(record),
	perception_denials(record),
	presence_denials(record),
	mind_denials(record),
	speech_denials(record),
	category_denials(record),
})

writer_denials := {"no_writer" | not known_writer}

# METADATA
# description: |
#   A record's categories are of its tenant's vocabulary (lib/categories). A record
#   derived from others carries none: a category is what a subject's grant reaches
#   (whose.disclosure.granted), and a grant must not widen a derivation past its
#   premises' audience, which only this policy can see.
category_denials(record) := {sprintf("unknown_category:%s", [name]) |
	some name in categories.unknown(input.writer.tenant, object.get(record, "categories", []))
} | {"derived_with_categories" |
	count(object.get(record, ["provenance", "derived_from"], [])) > 0
	count(object.get(record, "categories", [])) > 0
}

known_writer if {
	is_string(input.writer.id)
	is_string(input.writer.tenant)
}

tenant_denials(record) := {"tenant_mismatch" | not same_tenant(record)}

same_tenant(record) if record.tenant == input.writer.tenant

# A record nobody may read is a write error, not a secret.
audience_denials(record) := {"empty_audience" | not has_audience(record)}

has_audience(record) if count(record.audience) > 0

# Alice's words make Alice's beliefs: the holder of a spoken claim is its speaker,
# unless the record is what its holder heard or was told (told, below).
speaker_denials(record) := {"observer_not_speaker" |
	record.observer_id
	record.source.speaker
	record.observer_id != record.source.speaker
	not told(record)
}

# METADATA
# description: |
#   Someone else's words as their hearer holds them: what the hearer heard the speaker
#   say (act heard), or took from them as their own belief (a testimony source, as the
#   trust policy, whose.trust, decides).
told(record) if record.act == "heard"

told(record) if record.source.kind == "testimony"

# A claim about someone else's mind is its holder's view of them, never shared.
nested_denials(record) := {"nested_belief_as_shared_claim" | sources.shared_claim_about_another(record)}

evidence_denials(record) := {"known_without_evidence" |
	record.modality == "known"
	not known_from_the_start(record)
}

# Knowledge from valid_at on needs evidence that existed by then: an item dated
# (`at`) after valid_at supports no knowledge at that instant, and a record
# without a valid_at has no instant to know anything at.
known_from_the_start(record) if evidence.satisfies(record, record.valid_at)

announcement_denials(record) := union({
	{"common_knowledge_without_announcement" |
		record.modality == "common_knowledge"
		not sources.announced_to_group(record)
		not sources.member_absent(record)
	},
	# A witnessed announcement makes common knowledge only if all of G was there.
	{"common_knowledge_member_absent" |
		record.modality == "common_knowledge"
		not sources.announced_to_group(record)
		sources.member_absent(record)
	},
	# Common knowledge in G is had by every member of G: not by one the record's
	# scope keeps out.
	{"common_knowledge_group_not_cleared" |
		record.modality == "common_knowledge"
		not sources.reaches_every_member(record)
	},
})

# Sources and evidence that vouch for others (a change record, an announcement)
# may be cited only by writers holding a role the config names for that kind.
attestation_denials(record) := union({
	{"source_needs_role" | not attested(record.source.kind)},
	{"evidence_needs_role" |
		some item in record.evidence
		not attested(item.kind)
	},
	# Bob saying "I acknowledged it" is no more than Bob saying he knows: an
	# acknowledgement counts only as recorded by a relay (the chat integration).
	{"evidence_needs_relay" |
		some item in record.evidence
		item.kind in config.evidence.signed_by_knower
		not writer_may_relay
	},
})

attested(kind) if not config.attestation[kind]

attested(kind) if {
	some role in config.attestation[kind]
	directory.has_role(input.writer, role)
}

# Writing someone else's view needs a relay role (an extractor service): Alice
# cannot put beliefs in Bob's head by writing records that name him as holder.
# A relayed view must say whose words it came from.
holder_denials(record) := union({
	{"writer_not_holder" |
		voice(record) != input.writer.id
		not writer_may_relay
	},
	# A perception has no speaker: its witnessing evidence says whose it is.
	{"relay_without_speaker" |
		voice(record) != input.writer.id
		not record.source.speaker
		record.modality != "observed"
	},
})

# METADATA
# description: |
#   Whose words the record holds: its holder (observer_id), or, for a claim without
#   one (world state), whoever its source says spoke. Alice writing down what Bob
#   said as bare world state is relaying Bob's words, like writing Bob's belief.
voice(record) := record.observer_id if {
	record.observer_id
} else := record.source.speaker

writer_may_relay if {
	some role in config.ingest.relay_roles
	directory.has_role(input.writer, role)
}

# A writer cannot label a record with a scope it is not cleared for.
scope_denials(record) := {"scope_not_held" | not directory.clears_scope(record, input.writer)}

# A record derived from others (a summary) may reach no one its premises could
# not, and the writer must be able to read every premise.
derivation_denials(record) := union({
	{"premise_unavailable" |
		some id in record.provenance.derived_from
		not readable_premise(id)
	},
	# Entry by entry, literally: whoever may see the derived record may then see
	# every premise whatever the directory says later (a person named where a
	# premise names their group would keep the summary after leaving the group).
	{sprintf("derived_audience_wider:%s", [entry]) |
		some entry in record.audience
		some premise in premises_of(record)
		not entry in premise.audience
	},
	{"derived_scope_wider" |
		some premise in premises_of(record)
		premise.access_scope
		record.access_scope != premise.access_scope
	},
	{"derived_scope_wider" |
		some premise in premises_of(record)
		premise.access_scope
		not record.access_scope
	},
	# A derivation must not start after its premise stopped applying (a summary of
	# the venue written after the venue changed), nor build on a stale derivation.
	{"premise_superseded" |
		some premise in premises_of(record)
		premise.invalid_at
		time.parse_rfc3339_ns(premise.invalid_at) <= time.parse_rfc3339_ns(record.valid_at)
	},
	{"premise_stale" |
		some premise in premises_of(record)
		count(object.get(premise, "premise_changes", [])) > 0
	},
})

# Only premises the writer may read are compared: an unreadable one must answer
# exactly like a missing one (premise_unavailable), nothing more.
premises_of(record) := [premise |
	some id in record.provenance.derived_from
	some premise in input.premises
	premise.id == id
	readable(premise)
]

readable_premise(id) if {
	some premise in input.premises
	premise.id == id
	readable(premise)
}

readable(premise) if visibility.visible_to(premise, input.writer)

# Perception (modality `observed`, docs/design.md §3) is what its holder witnessed:
# the holder was there, their witnessing cited; a view of another's mind needs the
# other there too. Who may record perception at all is config.attestation (the
# `perception` source and `witnessed` evidence kinds): a relay, and one that was
# itself in the room records only its own.
perception_denials(record) := union({
	{"perception_holder_absent" |
		record.modality == "observed"
		not sources.witnessed(record, record.observer_id)
	},
	{"perception_observed_absent" |
		record.modality == "observed"
		some mind in minds_viewed(record)
		not sources.witnessed(record, mind)
	},
	{"perception_recorded_by_a_participant" |
		record.modality == "observed"
		voice(record) != input.writer.id
		input.writer.id in record.source.participants
	},
})

# Who was there is what each of them is later said to have heard or seen: a record
# naming Bob among its participants gives Bob's memory "bob heard alice say ...". So
# presence is attested like a source kind (issue 35): a writer may always say they were
# there themselves; naming anyone else needs a role config.attestation.presence names
# (by default a relay, the extractor).
presence_denials(record) := {"presence_not_attested" |
	some person in named_present(record)
	person != input.writer.id
	not writer_attests_presence
}

# METADATA
# description: |
#   Everyone the record says was there: its source's participants, and the unnoticed
#   (those among them the others did not see).
named_present(record) := {person | some person in record.source.participants} | {person |
	some person in record.source.unnoticed
}

# METADATA
# description: |
#   The writer holds a role that may attest others' presence: config.attestation.presence,
#   or, in a config that does not set it, the extractor role.
writer_attests_presence if {
	some role in object.get(config.attestation, "presence", ["extractor"])
	directory.has_role(input.writer, role)
}

# METADATA
# description: every mind the record is a view of (observed_id and the whole observed_path).
minds_viewed(record) := {mind | some mind in object.get(record, "observed_path", [])} | {mind |
	mind := record.observed_id
}

# A view of a mind is of a person: a group has members, and a belief "group:x knows p"
# would pass to whoever joins it.
mind_denials(record) := {"observed_is_a_group" |
	some mind in minds_viewed(record)
	startswith(mind, "group:")
}

# Speech acts (docs/design.md §3). A statement is its speaker's; what a hearer heard
# or was told names who said it, and the hearer was there to hear it.
speech_denials(record) := union({
	{"statement_without_speaker" |
		record.act == "said"
		not record.source.speaker
	},
	{"heard_from_someone_else" |
		record.act == "heard"
		record.observed_id != record.source.speaker
	},
	{"told_without_speaker" |
		told(record)
		not record.source.speaker
	},
	{"hearer_absent" |
		told(record)
		not record.observer_id in record.source.participants
	},
	{"told_by_oneself" |
		told(record)
		record.observer_id == record.source.speaker
	},
})
