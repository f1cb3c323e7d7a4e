# Erasure: may the asker erase these records, and what becomes of the records
# derived from them?
#
# Input: {asker, request: {kind, subject?, source?}, records, now}. `kind` is
# `records` (ids the asker named, each already one the asker may see: the
# sidecar asks the disclosure policy first and treats the others as missing),
# or `subject`, `source`, `tenant` (bulk requests, which reach records the
# asker may not see: only an erasure officer may make them).
# METADATA
# scope: package
# schemas:
#   - input: schema.erasure_input
#   - data.whose.config: schema.config
#   - data.whose.directory: schema.directory
#   - data.whose.holds: schema.holds
package whose.erasure

import data.whose.config
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
#   The decision for one record. `derived`: what becomes of the records derived
#   from it once it is erased (`flag`: served with a note, never as current;
#   `withdraw`: their valid time ends now; `erase`: erased with it).
decide(record) := {
	"allow": allow(record),
	"reasons": denials(record),
	"derived": config.erasure.on_derived,
}

default allow(_) := false

# METADATA
# description: allowed only when no rule refuses.
allow(record) if count(denials(record)) == 0

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
		input.request.kind != "records"
		not officer
	},
})

known_asker if {
	is_string(input.asker.id)
	is_string(input.asker.tenant)
}

# METADATA
# description: the asker holds a role the config names for erasure requests.
officer if {
	some role in config.erasure.officer_roles
	directory.has_role(input.asker, role)
}

default unrestricted := false

# METADATA
# description: a bulk request by an officer reaches records the officer may not see.
unrestricted if {
	input.request.kind != "records"
	officer
}

tenant_denials(record) := {"tenant_mismatch" | record.tenant != input.asker.tenant}

# A record is its holder's and its writer's to erase; an officer may erase any.
standing_denials(record) := {"not_holder_or_writer" |
	not officer
	not holder_or_writer(record)
}

holder_or_writer(record) if record.observer_id == input.asker.id

holder_or_writer(record) if record.source.speaker == input.asker.id

holder_or_writer(record) if record.provenance.writer == input.asker.id

# A bulk request erases only what it names: the sidecar's scan is not trusted for that.
match_denials(record) := union({
	{"not_about_subject" |
		input.request.kind == "subject"
		not subjects.concerns(record, input.request.subject)
	},
	{"not_from_source" |
		input.request.kind == "source"
		record.source_id != input.request.source
	},
})

# A legal hold stops erasure, by anyone.
hold_denials(record) := {"legal_hold" | subjects.held(record)}
