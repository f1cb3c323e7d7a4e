# METADATA
# scope: package
# description: |
#   Grants: a data subject's consent that a reader (a person, or `group:<name>`) may
#   see the subject's records of given categories, optionally for one purpose only,
#   until an optional end. The sidecar passes the grants in force at the read's `now`
#   (begun, not ended) that may concern a question as input.grants (policy/grants.py
#   `in_force`: the decision cache keys on them, so an end takes effect at its
#   instant; a rule that compared their times with input.now would turn the cache
#   off, policy/readset.py). These helpers say what a grant reaches, and the
#   disclosure policy (whose.disclosure `granted`) applies them: one for another
#   purpose, another category or another tenant reaches nothing.
package whose.lib.grants

# METADATA
# description: the grant names no purpose, or the one asked for.
serves(grant, _) if not grant.purpose

serves(grant, purpose) if grant.purpose == purpose

# METADATA
# description: the record carries one of the categories the grant names.
reaches(grant, record) if {
	some category in record.categories
	category in grant.categories
}
