# METADATA
# scope: package
# description: |
#   Trust: does a hearer take what they were told as their own belief?
#
#   A claim made to hearers gives each hearer the speech act (they heard the speaker
#   say p) and their model of the speaker's belief (B_hearer(B_speaker p)), derived
#   from the statement at read time. Whether the hearer also comes to believe p
#   themselves is decided here, per claim and hearer, when the statement is written
#   (sidecar/writes/testimony.py): an adopted claim is stored as the hearer's belief,
#   told to the hearer alone, with a `testimony` source naming the speaker.
#
#   By default nobody adopts anything: a statement can be a lie, and a hearer's own
#   view is what they saw. Two shipped examples, each switched on by policy data
#   (data.whose.config.trust), never by code:
#     adopt_from_roles: ["authority"]   adopt from a teller the directory gives one of
#                                       these roles;
#     adopt_more_recent_evidence: true  adopt from a teller whose own evidence about the
#                                       key (their latest perception of it, when they
#                                       spoke) is more recent than the hearer's. This
#                                       tells the hearer, by what they come to believe,
#                                       that the teller saw the key after they did
#                                       (docs/security.md, "Testimony").
#   A third, the convention of nested-belief benchmarks:
#     believe_told: true                a hearer believes what they are told (an
#                                       unhedged claim), unless they saw the key for
#                                       themselves at that instant; what they see later
#                                       supersedes it, and of two tellers the later
#                                       one's word supersedes the earlier's (one current
#                                       view per mind, by valid time).
#
#   Input: {claims: [{teller, hearers: [{id, evidence_at?}], key, hedged, about,
#   said_at, teller_evidence_at?}]}; answer: for each claim, in order, the ids of the
#   hearers who adopt it.
# schemas:
#   - input: schema.trust_input
#   - data.whose.config: schema.config
#   - data.whose.directory: schema.directory
package whose.trust

import data.whose.config
import data.whose.lib.directory

# METADATA
# description: for each claim of the input, in order, the hearers who adopt it.
# entrypoint: true
adoptions := [[hearer.id |
	some hearer in claim.hearers
	adopts(claim, hearer)
] |
	some claim in input.claims
]

# METADATA
# description: the trust settings (data.whose.config.trust); none set means never adopt.
settings := object.get(config, "trust", {})

default adopts(_, _) := false

# METADATA
# description: the teller holds a role the settings trust (an authority's word is taken).
adopts(claim, hearer) if {
	records_for(hearer)
	some role in object.get(settings, "adopt_from_roles", [])
	directory.has_role(claim.teller, role)
}

# METADATA
# description: the teller saw the key more recently than the hearer did (or the hearer never did).
adopts(claim, hearer) if {
	records_for(hearer)
	object.get(settings, "adopt_more_recent_evidence", false) == true
	more_recent(claim.teller_evidence_at, object.get(hearer, "evidence_at", null))
}

# METADATA
# description: |
#   The writer may record the hearer's belief: the hearer themselves, or a relay (the
#   write policy's config.ingest.relay_roles), as for any view held by someone else.
records_for(hearer) if input.writer.id == hearer.id

records_for(_) if {
	some role in config.ingest.relay_roles
	directory.has_role(input.writer, role)
}

more_recent(teller, null) if is_string(teller)

more_recent(teller, hearer) if time.parse_rfc3339_ns(teller) > time.parse_rfc3339_ns(hearer)

# METADATA
# description: |
#   believe_told: an unhedged claim is believed, unless the hearer saw the key for
#   themselves when it was said (their own sight then wins). What they see later, and
#   what a later teller says, supersede it by valid time: no rule is needed for those.
adopts(claim, hearer) if {
	records_for(hearer)
	object.get(settings, "believe_told", false) == true
	not claim.hedged
	not seen_when_told(claim.said_at, object.get(hearer, "evidence_at", null))
}

# METADATA
# description: the hearer's latest sight of the key is no earlier than the telling.
seen_when_told(said_at, seen_at) if time.parse_rfc3339_ns(seen_at) >= time.parse_rfc3339_ns(said_at)
