# Who a record concerns, and which records a legal hold keeps.
#
# A record concerns the person who holds the view (observer_id), the person
# whose mind it describes (observed_id), whoever said it (source.speaker) and
# whoever wrote it (provenance.writer): a subject request and a legal hold on a
# person reach every record that names them in one of those places.
# METADATA
# scope: package
# schemas:
#   - data.whose.holds: schema.holds
package whose.lib.subjects

# METADATA
# description: every person the record names as holder, observed mind, speaker or writer.
people(record) := {person |
	some path in [["observer_id"], ["observed_id"], ["source", "speaker"], ["provenance", "writer"]]
	person := object.get(record, path, null)
	is_string(person)
}

# METADATA
# description: the record concerns person.
concerns(record, person) if person in people(record)

# METADATA
# description: the tenant's legal holds (none when the holds document names no such tenant).
holds_of(tenant) := object.get(data.whose.holds.tenants, tenant, {"records": [], "subjects": []})

# METADATA
# description: a legal hold names the record itself.
held(record) if record.id in holds_of(record.tenant).records

# METADATA
# description: a legal hold names a person the record concerns.
held(record) if {
	some person in holds_of(record.tenant).subjects
	concerns(record, person)
}
