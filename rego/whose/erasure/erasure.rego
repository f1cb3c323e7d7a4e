# METADATA
# scope: package
# description: |
#   Erasure: may the asker make this erasure request, may each record be erased, and
#   what becomes of the records derived from an erased one?
#
#   Input: {asker, request: {kind, subject?, source?}, records, now}. `kind` is
#   `records`: ids the asker named. The sidecar asks the disclosure policy first and
#   answers for a record the asker may not see exactly as for a missing one, so every
#   record here is one the asker may see. `subject`, `source` and `tenant` are bulk
#   requests: they reach records the asker may not see, so only an erasure officer
#   (config.erasure.officer_roles) may make them, and each record must be what the
#   request names (the sidecar's scan is not trusted for that). `derived`: records
#   derived from one being erased, when its decision chose `erase` for them: the
#   erasure of their premise stands for them, and only the tenant and holds apply.
#
#   Requests by content: `proposition` (every record of a proposition `key`),
#   `query` (the records nearest a text, within a similarity bound) and `forget`
#   (what a standing forget rule names now: `rule_kind` value, key or pattern, with
#   its `subject` and `key`). An officer's reach every record of the tenant; anyone
#   else's only records they may see, and of those the ones they hold or wrote. The
#   policy never sees a record's claim, so a value, pattern or query match is the
#   sidecar's (sidecar/writes/forgetting.py); a key and a subject it checks here.
# schemas:
#   - input: schema.erasure_input
#   - data.whose.config: schema.config
#   - data.whose.directory: schema.directory
#   - data.whose.holds: schema.holds
package whose.erasure

import data.whose.lib.directory
import data.whose.lib.subjects

# METADATA
# description: |
#   What the sidecar asks: whether the request may be made at all, whether it
#   reaches records the asker may not see (`unrestricted`), and one decision per
#   record, keyed by id.
# entrypoint: true
answer := {
	"request": {
		"allow": count(request_denials) == 0,
		"reasons": request_denials,
		"unrestricted": unrestricted,
	},
	"decisions": {record.id: decide(record) | some record in input.records},
}

# METADATA
# description: |
#   The decision for one record: allowed when no rule refuses. `derived` says what
#   becomes of the records derived from it once it is erased.
decide(record) := {
	"allow": count(denials(record)) == 0,
	"reasons": denials(record),
	"derived": on_derived,
}

# METADATA
# description: |
#   What becomes of a record derived from an erased one (config.erasure.on_derived):
#   `flag` (served as stale, with a note saying why), `withdraw` (its valid time ends
#   now), `erase` (erased with it). Flagged when the config says nothing.
on_derived := object.get(data.whose.config, ["erasure", "on_derived"], "flag")

# METADATA
# description: every reason the record may not be erased (empty means allow).
denials(record) := union({
	request_denials,
	tenant_denials(record),
	standing_denials(record),
	match_denials(record),
	hold_denials(record),
})

# METADATA
# description: reasons the request as a whole is refused.
request_denials := union({
	{"no_asker" | not known_asker},
	{"needs_erasure_officer" |
		input.request.kind in bulk_kinds
		not officer
	},
	{"unknown_kind" | not input.request.kind in (({"records", "derived"} | bulk_kinds) | content_kinds)},
	{"key_missing" |
		input.request.kind == "proposition"
		not input.request.key
	},
	{"subject_missing" |
		input.request.kind == "subject"
		not input.request.subject
	},
	{"source_missing" |
		input.request.kind == "source"
		not input.request.source
	},
})

# METADATA
# description: the requests that reach records by what they are about, not by id.
bulk_kinds := {"subject", "source", "tenant"}

# METADATA
# description: the requests that reach records by what they say.
content_kinds := {"proposition", "query", "forget"}

known_asker if {
	is_string(input.asker.id)
	is_string(input.asker.tenant)
}

# METADATA
# description: the asker holds a role the config names for erasure requests.
officer if {
	some role in object.get(data.whose.config, ["erasure", "officer_roles"], [])
	directory.has_role(input.asker, role)
}

default unrestricted := false

# METADATA
# description: a bulk or content request by an officer reaches records the officer may not see.
unrestricted if {
	input.request.kind in (bulk_kinds | content_kinds)
	officer
}

tenant_denials(record) := {"tenant_mismatch" | record.tenant != input.asker.tenant}

# A record is its holder's and its writer's to erase; an officer may erase any.
standing_denials(record) := {"not_holder_or_writer" |
	input.request.kind in ({"records"} | content_kinds)
	not officer
	not holder_or_writer(record)
}

holder_or_writer(record) if subjects.holder(record) == input.asker.id

holder_or_writer(record) if record.provenance.writer == input.asker.id

# A bulk request erases only what it names.
match_denials(record) := union({
	{"not_about_subject" |
		input.request.kind == "subject"
		not subjects.concerns(record, input.request.subject)
	},
	{"not_from_source" |
		input.request.kind == "source"
		record.source_id != input.request.source
	},
	{"not_about_key" |
		input.request.kind in {"proposition", "forget"}
		input.request.key
		object.get(record, ["proposition", "key"], null) != input.request.key
	},
	# A forgotten key or pattern reaches its subject's records; a value any record.
	{"not_about_subject" |
		input.request.kind == "forget"
		input.request.rule_kind != "value"
		not subjects.concerns(record, input.request.subject)
	},
})

# A legal hold stops erasure, by anyone.
hold_denials(record) := {"legal_hold" | subjects.held(record)}
