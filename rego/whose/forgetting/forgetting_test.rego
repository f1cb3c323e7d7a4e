package whose.forgetting_test

import data.whose.forgetting

alice := {"id": "alice", "tenant": "acme"}

bob := {"id": "bob", "tenant": "acme"}

# An erasure officer by the demo directory (rego/whose/directory/data.json).
dpo := {"id": "dpo", "tenant": "acme"}

pin := {"kind": "value", "subject": "alice", "length": 4}

set(asker, rule) := answer if {
	answer := forgetting.rule with input as {"asker": asker, "action": "set", "rule": rule}
}

lift(asker, rule) := answer if {
	answer := forgetting.rule with input as {"asker": asker, "action": "lift", "rule": rule}
}

test_subject_sets_a_rule_for_themselves if set(alice, pin).allow

test_someone_else_may_not_set_a_rule_for_the_subject if {
	answer := set(bob, pin)
	not answer.allow
	answer.reasons == {"not_subject_or_officer"}
}

test_officer_sets_a_rule_for_anyone if set(dpo, pin).allow

test_default_deny_without_asker if {
	answer := forgetting.rule with input as {"action": "set", "rule": pin}
	"no_asker" in answer.reasons
}

test_unknown_action_and_missing_rule if {
	answer := forgetting.rule with input as {"asker": alice, "action": "forget"}
	answer.reasons == {"unknown_action", "no_rule"}
}

test_short_values_refused if {
	set(alice, object.union(pin, {"length": 3})).reasons == {"value_too_short"}
	set(alice, json.remove(pin, ["length"])).reasons == {"value_too_short"}
}

test_min_value_length_from_config if {
	answer := set(alice, pin) with data.whose.config.forgetting.min_value_length as 6
	answer.reasons == {"value_too_short"}
}

test_key_rule_allowed if set(alice, {"kind": "key", "subject": "alice", "key": "pin"}).allow

test_pattern_of_the_allowed_shape if set(alice, {"kind": "pattern", "subject": "alice", "pattern": "####"}).allow

test_pattern_without_placeholder_refused if {
	set(alice, {"kind": "pattern", "subject": "alice", "pattern": "1234"}).reasons == {"pattern_not_allowed"}
}

test_pattern_outside_the_shape_refused if {
	set(alice, {"kind": "pattern", "subject": "alice", "pattern": "[0-9]*#"}).reasons == {"pattern_not_allowed"}
	set(alice, {"kind": "pattern", "subject": "alice", "pattern": "##"}).reasons == {"pattern_not_allowed"}
	set(alice, {"kind": "pattern", "subject": "alice"}).reasons == {"pattern_not_allowed"}
}

test_patterns_switched_off_by_config if {
	answer := set(alice, {"kind": "pattern", "subject": "alice", "pattern": "####"}) with data.whose.config.forgetting.patterns as false
	answer.reasons == {"pattern_not_allowed"}
}

test_unknown_rule_kind_refused if set(alice, {"kind": "regex", "subject": "alice"}).reasons == {"unknown_rule_kind"}

test_subject_lifts_a_rule_an_officer_set if lift(alice, object.union(pin, {"set_by": "dpo"})).allow

test_setter_lifts_the_rule_it_set if lift(dpo, object.union(pin, {"set_by": "dpo"})).allow

test_someone_else_may_not_lift if {
	lift(bob, object.union(pin, {"set_by": "alice"})).reasons == {"not_subject_setter_or_officer"}
	lift(bob, pin).reasons == {"not_subject_setter_or_officer"}
}

test_officer_lifts_any_rule if lift({"id": "someone", "tenant": "acme", "roles": ["data_protection"]}, pin).allow

said_by(speaker, key) := {
	"id": "r1",
	"tenant": "acme",
	"observer_id": speaker,
	"modality": "asserted",
	"source_id": "chat-1",
	"source": {"kind": "conversation", "speaker": speaker},
	"provenance": {"writer": "relay"},
	"proposition": {"key": key},
	"audience": [speaker],
}

write(record, carried) := answer if {
	answer := forgetting.writes.r1 with input as {
		"asker": {"id": "relay", "tenant": "acme"},
		"action": "write",
		"records": [record],
		"carried": {"r1": carried},
	}
}

key_rule := {"id": "f2", "kind": "key", "subject": "alice", "key": "pin"}

pattern_rule := {"id": "f3", "kind": "pattern", "subject": "alice", "pattern": "####"}

value_rule := {"id": "f1", "kind": "value", "subject": "alice", "set_by": "alice"}

written_by(who, record, carried) := answer if {
	answer := forgetting.writes.r1 with input as {
		"asker": {"id": who, "tenant": "acme"},
		"action": "write",
		"records": [record],
		"carried": {"r1": carried},
	}
}

# The subject's own write keeps its words around the mask; anyone else's is masked
# whole (a mask in place would show them where the value sits).
test_a_value_is_masked_in_the_subjects_hearing if {
	written_by("alice", said_by("alice", "pin"), [value_rule]) == {"action": "redact", "rules": {"f1"}}
	write(said_by("alice", "pin"), [value_rule]) == {"action": "conceal", "rules": {"f1"}}
	told := object.union(said_by("bob", "code"), {"audience": ["bob", "alice"]})
	write(told, [value_rule]) == {"action": "conceal", "rules": {"f1"}}
}

# Bob's own note, out of Alice's hearing, is not hers to mask; an officer's rule is.
test_a_value_binds_only_what_its_subject_could_be_told_unless_an_officer_set_it if {
	write(said_by("bob", "code"), [value_rule]) == {"action": "keep", "rules": set()}
	officers := object.union(value_rule, {"set_by": "dpo"})
	write(said_by("bob", "code"), [officers]) == {"action": "conceal", "rules": {"f1"}}
}

test_a_forgotten_key_refuses_the_subjects_claim if {
	write(said_by("alice", "pin"), [key_rule]) == {"action": "refuse", "rules": {"f2"}}
}

test_a_forgotten_key_binds_only_records_about_the_subject if {
	write(said_by("bob", "pin"), [key_rule]) == {"action": "keep", "rules": set()}
	write(said_by("alice", "address"), [key_rule]) == {"action": "keep", "rules": set()}
}

test_a_pattern_binds_records_about_the_subject if {
	written_by("alice", said_by("alice", "pin"), [pattern_rule]) == {"action": "redact", "rules": {"f3"}}
	write(said_by("alice", "pin"), [pattern_rule]) == {"action": "conceal", "rules": {"f3"}}
	write(said_by("bob", "room"), [pattern_rule]) == {"action": "keep", "rules": set()}
}

test_config_refuses_instead_of_redacting if {
	answer := write(said_by("alice", "pin"), [value_rule]) with data.whose.config.forgetting.on_write as "refuse"
	answer.action == "refuse"
}

test_key_and_value_rules_together_refuse if {
	write(said_by("alice", "pin"), [value_rule, key_rule]) == {"action": "refuse", "rules": {"f1", "f2"}}
}

test_nothing_carried_nothing_decided if {
	answer := forgetting.writes with input as {"asker": alice, "action": "write"}
	answer == {}
}
