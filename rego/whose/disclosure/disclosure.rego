# METADATA
# scope: package
# description: |
#   Disclosure: may this record be shown to the asker and everyone in the
#   response audience, and as what?
#
#   Input: {asker, audience, purpose, now, as_of, grants, records} (or one
#   `record`, for explain); `grants`: the subjects' grants that may concern the
#   hearers (policy/grants.py), applied by `granted`. The sidecar asks once per candidate batch (`batch`); `decision` is
#   the one rule for one record, applied to each.
#
#   A record is denied for every reason any rule of package
#   whose.disclosure.denials gives it (denials/denials.rego): adding a rule there adds a
#   denial, to decisions and to explain alike, with no list to keep in step.
# schemas:
#   - input: schema.disclosure_input
#   - data.whose.config: schema.config
#   - data.whose.directory: schema.directory
#   - data.whose.vocabulary: schema.vocabulary
package whose.disclosure

import data.whose.disclosure.denials
import data.whose.lib.evidence
import data.whose.lib.grants
import data.whose.lib.lineage
import data.whose.lib.sources
import data.whose.lib.subjects
import data.whose.lib.validity
import data.whose.lib.visibility

# METADATA
# description: |
#   What the sidecar asks for a batch: one decision per record (keyed by id), and
#   the vocabulary that words them (data.whose.vocabulary: a sentence per usable_as;
#   a use without one is disclosed to nobody).
# entrypoint: true
batch := {"decisions": decisions, "vocabulary": data.whose.vocabulary}

# METADATA
# description: one decision per candidate record, keyed by record id.
decisions := {record.id: decision(record) | some record in records}

# METADATA
# description: the single-record rule (input.record), for tests.
single := decision(input.record)

# METADATA
# description: |
#   The asker has a subject and a tenant. Kept here, not in whose.disclosure.denials,
#   where every rule must be a set of reasons per record: explanation walks that package.
known_asker if {
	is_string(input.asker.id)
	is_string(input.asker.tenant)
}

# METADATA
# description: the records asked about, a batch or one.
records := input.records if {
	is_array(input.records)
} else := [input.record] if {
	input.record
} else := []

# METADATA
# description: the decision for one record.
decision(record) := {
	"allow": allowed(denied),
	"usable_as": use,
	"obligations": obligations(use),
	"reasons": ((denied | notes(record, use)) | lineage.notes(record)),
} if {
	denied := object.get(denied_by_id, record.id, set())
	use := usable_as(record)
}

default allowed(_) := false

# METADATA
# description: allowed only when no rule denies; every check is written so that a missing field denies.
allowed(denied) if count(denied) == 0

# METADATA
# description: |
#   Every reason any denial rule gives each record, by record id (none means allow).
#   Gathered once per query: walking the package of denials for each record would
#   assemble it again each time.
denied_by_id := {id: union({object.get(by_record, id, set()) | some by_record in by_rule}) |
	by_rule := [by_record | some by_record in denials]
	some by_record in by_rule
	some id, _ in by_record
}

# METADATA
# description: |
#   Everyone who will hear the answer: the asker, and each audience member (who
#   carry no token claims: only the directory speaks for them).
members contains input.asker

members contains {"id": id, "tenant": input.asker.tenant} if {
	some id in input.audience
	id != input.asker.id
}

# METADATA
# description: the instant asked about.
as_of := object.get(input, "as_of", input.now)

# METADATA
# description: as_of in nanoseconds since 1970, parsed once per query.
as_of_ns := time.parse_rfc3339_ns(as_of)

# METADATA
# description: |
#   Disclosed because a live grant by the record's subject covers this hearer (by
#   name, or a group they are in), one of the record's categories and the purpose
#   asked for (whose.disclosure.denials.hearers then gives no reason). The subject
#   is the one person the record concerns (lib/subjects `people`): what someone
#   else said, or a view of another's mind, is not one person's to give away, and
#   no grant reaches it. A grant widens whom the record's audience admits, nothing
#   else: the hearer is still of the record's tenant and cleared for its access scope.
granted(record, member) if {
	record.tenant == member.tenant
	sight := visibility.sight_of(member)
	visibility.cleared(record, sight)
	some grant in object.get(grants_by_subject, sole_subject(record), [])
	grant.reader in sight.entries
	grants.reaches(grant, record)
}

# METADATA
# description: |
#   The one person the record concerns: its holder, when no other person said it or
#   has their mind described by it (lib/subjects `people`); undefined otherwise. Each
#   field is named, so the read-set analysis still shares decisions (policy/readset.py).
sole_subject(record) := holder if {
	holder := subjects.holder(record)
	not said_by_another(record, holder)
	not describes_another(record, holder)
}

said_by_another(record, holder) if {
	is_string(record.source.speaker)
	record.source.speaker != holder
}

describes_another(record, holder) if {
	is_string(record.observed_id)
	record.observed_id != holder
}

# METADATA
# description: |
#   The grants of the input (those in force at `now`, as the sidecar passes them:
#   consent is given or withdrawn at the moment of disclosure, whatever instant is
#   asked about), of the asker's tenant and for the purpose asked for, by their
#   subject: gathered once per query.
grants_by_subject := {subject: [grant | some grant in live_grants; grant.subject == subject] |
	some given in live_grants
	subject := given.subject
}

live_grants := [grant |
	some grant in object.get(input, "grants", [])
	grant.tenant == input.asker.tenant
	grants.serves(grant, input.purpose)
]

# METADATA
# description: |
#   The single-record decision and, rule by rule, what each contributed
#   (input.record): every rule of whose.disclosure.denials, then the notes and the use.
# entrypoint: true
explanation := {
	"decision": single,
	"rules": array.concat(
		[{"rule": sprintf("data.whose.disclosure.denials.%s", [name]), "reasons": sort(object.get(by_record, input.record.id, set()))} |
			some name, by_record in denials
		],
		[
			{"rule": "data.whose.disclosure.notes", "reasons": sort(notes(input.record, usable_as(input.record)))},
			{"rule": "data.whose.lib.lineage.notes", "reasons": sort(lineage.notes(input.record))},
			{"rule": "data.whose.disclosure.usable_as", "reasons": [usable_as(input.record)]},
		],
	),
}

# METADATA
# description: the record applied at the instant asked about (as_of); an input without one has no such instant.
applies(record) if validity.current_at_ns(record, as_of_ns)

# METADATA
# description: |
#   What the record may support, from its modality and support. A world-state claim
#   is a fact at the instant asked about (as_of, which defaults to now): a recall
#   as of a past date returns what was current then, as what it was then. Evidence
#   for knowledge counts only if it existed at as_of. A record about someone else's
#   mind (observed_id) is at most its holder's view of them: never a fact, an
#   unverified claim or common knowledge, and knowledge only as `known` with
#   evidence tied to the knower; a view nested deeper than one mind is a nested
#   belief whatever it says (A's view of B's view of C's knowledge is not C's). A
#   perception (`observed`) is at most its holder's belief: witnessing is no evidence
#   the evidence policy accepts for knowledge. A speech act is never a belief: what
#   its holder heard someone say (act heard), or their own statement (act said),
#   which may be a lie.
usable_as(record) := "belief" if {
	# The common case first: a belief of its holder's own (no rule below can hold).
	not record.modality in {"world_state", "known", "common_knowledge"}
	not record.observed_id
	not record.act
} else := "heard" if {
	record.act == "heard"
} else := "statement" if {
	record.act == "said"
	not record.observed_id
} else := "nested_belief" if {
	sources.shared_claim_about_another(record)
} else := "nested_belief" if {
	count(record.observed_path) > 1
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
	sources.announced_to_group(record)
	sources.reaches_every_member(record)
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
# description: |
#   Why a record was downgraded (reported with allowed records too). Only these
#   modalities are ever downgraded; the rest skip the six checks.
notes(record, use) := union({
	{"not_authoritative" | record.modality == "world_state"; not sources.authoritative(record)},
	{"not_current" | record.modality == "world_state"; not applies(record)},
	{"evidence_insufficient" | record.modality == "known"; use != "knowledge"},
	{"announcement_not_qualifying" | record.modality == "common_knowledge"; not sources.announced_to_group(record)},
	{"common_knowledge_group_not_cleared" | record.modality == "common_knowledge"; not sources.reaches_every_member(record)},
	{"nested_belief_not_shared" | sources.shared_claim_about_another(record)},
}) if record.modality in {"world_state", "known", "common_knowledge"}

else := set()
