# METADATA
# scope: package
# description: |
#   Whose a record is, who it concerns, and which records a legal hold keeps.
#
#   A record concerns the person who holds the view (observer_id), the person whose
#   mind it describes (observed_id) and whoever said it (source.speaker); a claim
#   with neither holder nor speaker (world state an authority wrote) is its
#   writer's. A subject erasure request and a legal hold on a person reach every
#   record that names them in one of those places. People who were merely present
#   (source.participants) or may read it (audience) are not what it is about.
# schemas:
#   - data.whose.holds: schema.holds
package whose.lib.subjects

# METADATA
# description: whose claim the record is - its holder, else its speaker, else its writer.
holder(record) := record.observer_id if {
	record.observer_id
} else := record.source.speaker if {
	record.source.speaker
} else := record.provenance.writer

# METADATA
# description: every person the record is about - its holder, the observed mind, its speaker.
people(record) := {person |
	some path in [["observer_id"], ["observed_id"], ["source", "speaker"]]
	person := object.get(record, path, null)
	is_string(person)
} | {person | person := holder(record)}

# METADATA
# description: the record concerns person.
concerns(record, person) if person in people(record)

# METADATA
# description: the tenant's legal holds (none when the holds document names no such tenant).
holds_of(tenant) := object.get(data.whose.holds, ["tenants", tenant], {})

default held(_) := false

# METADATA
# description: a legal hold names the record itself.
held(record) if record.id in object.get(holds_of(record.tenant), "records", [])

# METADATA
# description: a legal hold names a person the record concerns.
held(record) if {
	some person in object.get(holds_of(record.tenant), "subjects", [])
	concerns(record, person)
}
