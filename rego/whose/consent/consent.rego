# METADATA
# scope: package
# description: |
#   Consent: may the asker grant a reader access to a subject's records of some
#   categories, or revoke such a grant?
#
#   A grant is the subject's to give and to take back: the subject themselves, or
#   someone holding one of the roles data.whose.config.consent.act_for_roles names
#   (a guardian, a data protection officer; none when unset) acting for anyone of
#   their tenant. A grant names categories of the tenant's vocabulary (lib/categories)
#   and a reader other than its subject, and an end, if it has one, after now. The
#   disclosure policy applies the grants in force (whose.disclosure `granted`).
#
#   Default deny: an unknown action, an asker without a name or tenant, or a grant
#   that breaks a rule is refused, each naming why.
#
#   Input: {asker, action: grant | revoke, grant: {subject, reader, categories,
#   purpose?, until?}, now}; answer: {allow, reasons}, allowed only when `reasons`
#   is empty.
# schemas:
#   - input: schema.consent_input
#   - data.whose.config: schema.config
#   - data.whose.directory: schema.directory
package whose.consent

import data.whose.config
import data.whose.lib.categories
import data.whose.lib.directory

# METADATA
# description: the decision on the action - allowed only when no rule gives a reason against it.
# entrypoint: true
decision := {"allow": count(denials) == 0, "reasons": sort(denials)}

# METADATA
# description: every reason the action is refused (empty means allow).
denials := union({
	asker_denials,
	action_denials,
	agent_denials,
	category_denials,
	reader_denials,
	end_denials,
})

# An authenticated asker has a name and a tenant (the grant is the tenant's).
asker_denials := {"no_asker" | not known_asker}

known_asker if {
	is_string(input.asker.id)
	is_string(input.asker.tenant)
}

action_denials := {"unknown_action" | not input.action in {"grant", "revoke"}}

# METADATA
# description: only the subject, or someone the policy lets act for them, grants or revokes.
agent_denials := {"not_subject_or_agent" | not acts_for_subject}

acts_for_subject if input.asker.id == input.grant.subject

acts_for_subject if {
	some role in object.get(config, ["consent", "act_for_roles"], [])
	directory.has_role(input.asker, role)
}

# METADATA
# description: a grant names at least one category, each of the tenant's vocabulary.
category_denials := {"no_categories" |
	input.action == "grant"
	count(input.grant.categories) == 0
} | {sprintf("unknown_category:%s", [name]) |
	input.action == "grant"
	some name in categories.unknown(input.asker.tenant, input.grant.categories)
}

# A subject needs no grant to see their own records.
reader_denials := {"reader_is_subject" |
	input.action == "grant"
	input.grant.reader == input.grant.subject
}

# METADATA
# description: a grant that would end at once (or has an end that is not a time) grants nothing.
end_denials := {"ends_before_now" |
	input.action == "grant"
	input.grant.until
	not ends_after_now
}

ends_after_now if time.parse_rfc3339_ns(input.grant.until) > time.parse_rfc3339_ns(input.now)
