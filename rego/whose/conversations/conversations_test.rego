package whose.conversations_test

import data.whose.conversations

relay := {"id": "extractor-bot", "tenant": "acme", "roles": ["extractor"]}

bob := {"id": "bob", "tenant": "acme", "roles": []}

authority := {"id": "narrator", "tenant": "acme", "roles": ["authority"]}

joined(person) := {"person": person, "change": "join", "at": "2026-03-01T10:00:00Z"}

record(writer, event) := result if {
	result := conversations.decision with input as {"writer": writer, "action": "record", "conversation": "kitchen", "event": event}
}

correct(writer, event, corrected) := result if {
	result := conversations.decision with input as {
		"writer": writer, "action": "record", "conversation": "kitchen",
		"event": event, "corrected": corrected,
	}
}

resolve(writer) := result if {
	result := conversations.decision with input as {"writer": writer, "action": "resolve", "conversation": "kitchen"}
}

allowed := {"allow": true, "reasons": []}

not_attested := {"allow": false, "reasons": ["presence_not_attested"]}

# --- recording who joined and left -------------------------------------------------------

test_a_relay_records_anyone if record(relay, joined("alice")) == allowed

# Nobody adds themselves to a conversation (they would hear its members from then on,
# or from any instant they name); leaving is one's own to record.
test_nobody_records_their_own_joining if record(bob, joined("bob")) == not_attested

test_anyone_records_their_own_leaving if {
	record(bob, object.union(joined("bob"), {"change": "leave"})) == allowed
	record(bob, object.union(joined("alice"), {"change": "leave"})) == not_attested
}

test_nobody_else_records_someone_elses if record(bob, joined("alice")) == not_attested

test_configured_presence_roles_replace_the_extractor if {
	settings := {"presence": ["scribe"]}
	scribe := {"id": "sam", "tenant": "acme", "roles": ["scribe"]}
	decision := conversations.decision with input as {"writer": scribe, "action": "record", "conversation": "kitchen", "event": joined("alice")}
		with data.whose.config.attestation as settings
	decision == allowed
	refused := conversations.decision with input as {"writer": relay, "action": "record", "conversation": "kitchen", "event": joined("alice")}
		with data.whose.config.attestation as settings
	refused == not_attested
}

# --- corrections ----------------------------------------------------------------------------

test_the_writer_of_an_event_corrects_it if {
	correct(relay, joined("alice"), object.union(joined("alice"), {"writer": "extractor-bot"})) == allowed
}

test_another_relay_may_not_correct_it if {
	other := {"id": "other-bot", "tenant": "acme", "roles": ["extractor"]}
	corrected := object.union(joined("alice"), {"writer": "extractor-bot"})
	correct(other, joined("alice"), corrected) == {"allow": false, "reasons": ["not_event_writer", "role_required:authority"]}
}

test_an_authority_corrects_anyones if {
	corrected := object.union(joined("bob"), {"writer": "bob"})
	correct(authority, joined("bob"), corrected) == {"allow": false, "reasons": ["presence_not_attested"]}
	authority_relay := object.union(authority, {"roles": ["authority", "extractor"]})
	correct(authority_relay, joined("bob"), corrected) == allowed
}

test_configured_corrector_roles if {
	corrected := object.union(joined("alice"), {"writer": "extractor-bot"})
	moderator := {"id": "mo", "tenant": "acme", "roles": ["extractor", "moderator"]}
	decision := conversations.decision with input as {
		"writer": moderator, "action": "record", "conversation": "kitchen",
		"event": joined("alice"), "corrected": corrected,
	}
		with data.whose.config.conversations as {"corrector_roles": ["moderator"]}
	decision == allowed
}

# --- resolving hearers from membership --------------------------------------------------

test_a_relay_resolves_hearers if resolve(relay) == allowed

test_nobody_else_resolves_hearers if resolve(bob) == not_attested

# --- default deny -----------------------------------------------------------------------------

test_an_unknown_action_is_refused if {
	decision := conversations.decision with input as {"writer": relay, "action": "erase", "conversation": "kitchen"}
	decision == {"allow": false, "reasons": ["unknown_action"]}
}

test_a_writer_without_a_tenant_is_refused if {
	decision := conversations.decision with input as {"writer": {"id": "x"}, "action": "resolve", "conversation": "kitchen"}
	decision.allow == false
	"no_writer" in decision.reasons
}
