# METADATA
# scope: package
# description: |
#   Conversations: who may say who was in a conversation, and when.
#
#   A conversation (its source_id) has members who join and leave at instants
#   (sidecar/writes/membership.py); an observation in it posted without participants is
#   heard by its members at said_at. Saying someone joined is saying they were there to
#   hear what followed, so a membership event is attested like presence (issue 35):
#   anyone may record their own joining or leaving; recording anyone else's needs a role
#   config.attestation.presence names (by default the extractor, a relay).
#
#   A correction (an event naming the one it corrects) is itself an event, and rewrites
#   who heard what is said from then on: only the writer of the corrected event, or a
#   holder of a role config.conversations.corrector_roles names (["authority"] when
#   unset), may make it.
#
#   Resolving an observation's hearers from membership (action `resolve`) is asked
#   before the membership is read, with nothing but the writer: a writer refused is
#   heard alone (as an observation without participants always was), whatever the
#   conversation's members are, so the answer tells nobody who is in a conversation.
#
#   Input: {writer, action: record | resolve, conversation, event?: {person, change,
#   at}, corrected?: {person, change, at, writer}}; answer: {allow, reasons}, allowed
#   only when `reasons` is empty.
# schemas:
#   - input: schema.conversations_input
#   - data.whose.config: schema.config
#   - data.whose.directory: schema.directory
package whose.conversations

import data.whose.config
import data.whose.lib.directory

# METADATA
# description: the decision - allowed only when no rule gives a reason against it.
# entrypoint: true
decision := {"allow": count(denials) == 0, "reasons": sort(denials)}

# METADATA
# description: every reason the action is refused (empty means allow).
denials := union({
	writer_denials,
	action_denials,
	presence_denials,
	correction_denials,
})

# METADATA
# description: the actions this policy decides; any other is refused.
actions := {"record", "resolve"}

# METADATA
# description: |
#   The roles that may correct anyone's membership event
#   (data.whose.config.conversations.corrector_roles), `authority` when unset.
corrector_roles := object.get(config, ["conversations", "corrector_roles"], ["authority"])

writer_denials := {"no_writer" | not known_writer}

known_writer if {
	is_string(input.writer.id)
	is_string(input.writer.tenant)
}

action_denials := {"unknown_action" | not input.action in actions}

# METADATA
# description: |
#   Recording a join (anyone's, one's own too: a person who could add themselves to
#   any conversation, at any instant, would hear what its members say), someone else's
#   leaving, or resolving hearers from membership, attests presence: a presence-
#   attesting role's. One's own leaving is one's own to record: it only narrows who hears.
presence_denials := {"presence_not_attested" |
	input.action == "record"
	not own_leave
	not attests_presence
} | {"presence_not_attested" |
	input.action == "resolve"
	not attests_presence
}

own_leave if {
	input.event.change == "leave"
	input.event.person == input.writer.id
}

# METADATA
# description: |
#   The writer holds a role that may attest others' presence: config.attestation.presence,
#   or, in a config that does not set it, the extractor role (as the ingest policy reads it).
attests_presence if {
	some role in object.get(config, ["attestation", "presence"], ["extractor"])
	directory.has_role(input.writer, role)
}

# METADATA
# description: |
#   A correction rewrites who heard what: its writer wrote the corrected event, or holds
#   a corrector role. The refusal names both ways to be allowed.
correction_denials := {"not_event_writer"} | {sprintf("role_required:%s", [role]) | some role in corrector_roles} if {
	input.action == "record"
	input.corrected
	not wrote_corrected
	not corrector
} else := set()

wrote_corrected if input.corrected.writer == input.writer.id

# METADATA
# description: the writer holds one of the corrector roles, by token or by the directory.
corrector if {
	some role in corrector_roles
	directory.has_role(input.writer, role)
}
