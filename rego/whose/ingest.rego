# Ingest: may this record be stored as written?
#
# The write path's job is to keep points of view apart: a statement by Alice
# may create Alice's belief, never Bob's belief or knowledge, and never a fact.
# Input: {writer, record, premises} for one record, or {writer, records,
# premises} for a batch; `decisions` applies `decision` to each record.
package whose.ingest

import data.whose.config
import data.whose.lib.directory
import data.whose.lib.evidence
import data.whose.lib.sources

# METADATA
# description: one decision per record of a batch, keyed by record id.
decisions[record.id] := decide(record) if some record in input.records

# METADATA
# description: the single-record rule (input.record).
decision := decide(input.record)

# METADATA
# description: the decision for one record.
decide(record) := {"allow": allow(record), "reasons": denials(record)}

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
	evidence_denials(record),
	announcement_denials(record),
	authority_denials(record),
})

writer_denials := {"no_writer" | not known_writer}

known_writer if {
	is_string(input.writer.id)
	is_string(input.writer.tenant)
}

tenant_denials(record) := {"tenant_mismatch" | not same_tenant(record)}

same_tenant(record) if record.tenant == input.writer.tenant

# A record nobody may read is a write error, not a secret.
audience_denials(record) := {"empty_audience" | not has_audience(record)}

has_audience(record) if count(record.audience) > 0

# Alice's words make Alice's beliefs: the holder of a spoken claim is its speaker.
speaker_denials(record) := {"observer_not_speaker" |
	record.observer_id
	record.source.speaker
	record.observer_id != record.source.speaker
}

evidence_denials(record) := {"known_without_evidence" |
	record.modality == "known"
	not evidence.satisfies(record)
}

announcement_denials(record) := {"common_knowledge_without_announcement" |
	record.modality == "common_knowledge"
	not sources.qualifying_announcement(record)
}

# Only writers holding an authority role may cite an authoritative source.
authority_denials(record) := {"authoritative_source_needs_authority" |
	sources.authoritative(record)
	not writer_is_authority
}

writer_is_authority if {
	some role in config.authoritative.writer_roles
	directory.has_role(input.writer, role)
}
