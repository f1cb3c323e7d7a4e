# Disclosure: may this record be shown to the asker and everyone in the
# response audience, and as what?
#
# Input: {asker, audience, purpose, now, as_of, records}. The sidecar asks once
# per candidate batch; `decisions` applies the single-record rule `decision`
# to every record, so the batch and the single answer can never diverge.
package whose.disclosure

import data.whose.lib.directory
import data.whose.lib.evidence
import data.whose.lib.sources
import data.whose.lib.validity

# METADATA
# description: one decision per candidate record, keyed by record id.
decisions[record.id] := decision(record) if some record in input.records

# METADATA
# description: the single-record rule (input.record), for explain and tests.
single := decision(input.record)

# METADATA
# description: the decision for one record.
decision(record) := {
	"allow": allowed(denied),
	"usable_as": use,
	"obligations": obligations(use),
	"reasons": (denied | notes(record, use)),
} if {
	denied := denials(record)
	use := usable_as(record)
}

default allowed(_) := false

# METADATA
# description: allowed only when no rule denies; every check is written so that a missing field denies.
allowed(denied) if count(denied) == 0

# The asker is always in the audience; other members carry no token claims.
members contains input.asker

members contains {"id": id, "tenant": input.asker.tenant} if {
	some id in input.audience
	id != input.asker.id
}

as_of := object.get(input, "as_of", input.now)

# METADATA
# description: |
#   The hard constraints one audience member puts on a record: same tenant, named in
#   the audience, cleared for its scope. The sidecar partially evaluates this rule
#   with the record unknown (OPA's Compile API) and hands the residue to the store as
#   a filter, so records nobody in the audience may see are not even ranked. Every
#   record is still decided by `decision`; visible_to_test.rego checks that this rule
#   holds for every record `decision` allows.
visible_to(record, member) if {
	record.tenant == member.tenant
	directory.admits(record, member)
	directory.clears_scope(record, member)
}

# METADATA
# description: every reason this record may not be disclosed (empty means allow).
denials(record) := union({reasons | some reasons in denials_by_rule(record)})

# METADATA
# description: the denials grouped by the rule that made them (what explain shows).
denials_by_rule(record) := {
	"data.whose.disclosure.asker_denials": asker_denials,
	"data.whose.disclosure.tenant_denials": tenant_denials(record),
	"data.whose.disclosure.audience_denials": audience_denials(record),
	"data.whose.disclosure.scope_denials": scope_denials(record),
	"data.whose.disclosure.time_denials": time_denials(record),
	"data.whose.disclosure.purpose_denials": purpose_denials,
}

# METADATA
# description: the single-record decision and, rule by rule, what each contributed (input.record).
explanation := {
	"decision": single,
	"rules": [{"rule": rule, "reasons": sort(reasons)} |
		some rule, reasons in rule_reasons(input.record)
	],
}

rule_reasons(record) := object.union(
	denials_by_rule(record),
	{
		"data.whose.disclosure.notes": notes(record, usable_as(record)),
		"data.whose.disclosure.usable_as": {usable_as(record)},
	},
)

# An identity without a subject or a tenant is a wiring bug upstream: refuse.
asker_denials := {"no_asker" | not known_asker}

known_asker if {
	is_string(input.asker.id)
	is_string(input.asker.tenant)
}

tenant_denials(record) := {"tenant_mismatch" | not same_tenant(record)}

same_tenant(record) if record.tenant == input.asker.tenant

audience_denials(record) := {sprintf("audience_excludes:%s", [member.id]) |
	some member in members
	not directory.admits(record, member)
}

scope_denials(record) := {sprintf("scope_not_cleared:%s", [member.id]) |
	some member in members
	not directory.clears_scope(record, member)
}

# An unknown purpose is a caller bug; refuse rather than guess which rules apply.
purpose_denials := {"unknown_purpose" | not input.purpose in {"recall", "get", "history", "explain"}}

# Recall asks for what applied at as_of; get and history show any version.
time_denials(record) := {"not_valid_at_as_of" |
	input.purpose == "recall"
	not applies(record)
}

# METADATA
# description: the record applied at the instant asked about (as_of); an input without one has no such instant.
applies(record) if validity.current_at(record, as_of)

# METADATA
# description: |
#   What the record may support, from its modality and support. A world-state claim
#   is a fact at the instant asked about (as_of, which defaults to now): a recall
#   as of a past date returns what was current then, as what it was then. Evidence
#   for knowledge counts only if it existed at as_of. A record about someone else's
#   mind (observed_id) is at most its holder's view of them: never a fact, an
#   unverified claim or common knowledge, and knowledge only as `known` with
#   evidence tied to the knower.
usable_as(record) := "nested_belief" if {
	sources.shared_claim_about_another(record)
} else := "fact" if {
	record.modality == "world_state"
	sources.authoritative(record)
	applies(record)
} else := "unverified_claim" if {
	record.modality == "world_state"
} else := "knowledge" if {
	record.modality == "known"
	evidence.satisfies(record, as_of)
} else := "common_knowledge" if {
	record.modality == "common_knowledge"
	sources.qualifying_announcement(record)
} else := "nested_belief" if {
	record.observed_id
} else := "belief"

# METADATA
# description: what the caller must do when it uses the record.
obligations(use) := union({
	{"cite_source"},
	{"attribute" | use != "fact"},
	{"verify_before_acting" | use == "unverified_claim"},
})

# METADATA
# description: why a record was downgraded (reported with allowed records too).
notes(record, use) := union({
	{"not_authoritative" | record.modality == "world_state"; not sources.authoritative(record)},
	{"not_current" | record.modality == "world_state"; not applies(record)},
	{"evidence_insufficient" | record.modality == "known"; use != "knowledge"},
	{"announcement_not_qualifying" | record.modality == "common_knowledge"; not sources.qualifying_announcement(record)},
	{"nested_belief_not_shared" | sources.shared_claim_about_another(record)},
})
