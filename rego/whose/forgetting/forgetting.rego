# METADATA
# scope: package
# description: |
#   Standing forget rules ("never keep my PIN"): who may set one, for whom and in
#   which form; who may lift it; and what becomes of a later write that carries it.
#
#   A rule forgets a `value` (a literal), a proposition `key`, or a `pattern` (a
#   shape: `#` a digit, `@` a letter, any other allowed character itself, matched
#   whole-word, in time linear in the text). The policy never sees a rule's value
#   (only its `length`) nor a record's claim: the sidecar finds which rules a record
#   carries (sidecar/writes/forgetting.py) and this policy decides the rest.
#
#   Input: {asker, action, rule?, records?, carried?}. `action` is `set` or `lift`
#   (asked through `rule`), or `write` (asked through `writes`: `carried` maps each
#   record id to the rules it carries, `records` are the records as the write
#   policy sees them).
# schemas:
#   - input: schema.forgetting_input
#   - data.whose.config: schema.config
#   - data.whose.directory: schema.directory
package whose.forgetting

import data.whose.lib.directory
import data.whose.lib.subjects

# METADATA
# description: May the asker set (or lift) the rule? Every reason it may not.
# entrypoint: true
rule := {"allow": count(rule_denials) == 0, "reasons": rule_denials}

# METADATA
# description: |
#   For each record of a write, keyed by id: the rules that bind it and what becomes
#   of it - `keep` (no rule binds it), `redact` (what the rules name is masked, and
#   the record stored), `refuse` (the write is refused).
# entrypoint: true
writes := {id: write_decision(id, carried) | some id, carried in object.get(input, "carried", {})}

# METADATA
# description: every reason the asker may not set or lift the rule (empty means allow).
rule_denials := union({
	{"no_asker" | not known_asker},
	{"unknown_action" | not input.action in {"set", "lift"}},
	{"no_rule" | not input.rule},
	standing_denials,
	form_denials,
})

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

# A rule is set by its subject, or by an erasure officer for anyone of the tenant.
standing_denials contains "not_subject_or_officer" if {
	input.action == "set"
	input.rule.subject != input.asker.id
	not officer
}

# A rule is lifted by its subject, whoever set it, or an erasure officer.
standing_denials contains "not_subject_setter_or_officer" if {
	input.action == "lift"
	not input.asker.id in {input.rule.subject, object.get(input.rule, "set_by", null)}
	not officer
}

# METADATA
# description: |
#   The forms a rule may take when it is set: a value long enough not to mask
#   common words (config.forgetting.min_value_length, 4 unless set), a pattern of
#   the allowed shape with at least one placeholder, patterns allowed at all
#   (config.forgetting.patterns, true unless set), and a kind the sidecar knows.
form_denials := union({
	{"value_too_short" |
		input.action == "set"
		input.rule.kind == "value"
		object.get(input.rule, "length", 0) < min_value_length
	},
	{"pattern_not_allowed" |
		input.action == "set"
		input.rule.kind == "pattern"
		not allowed_pattern(object.get(input.rule, "pattern", ""))
	},
	{"unknown_rule_kind" |
		input.action == "set"
		not input.rule.kind in {"value", "key", "pattern"}
	},
})

min_value_length := object.get(data.whose.config, ["forgetting", "min_value_length"], 4)

# METADATA
# description: a shape of 4 to 64 allowed characters, with a digit or letter placeholder.
allowed_pattern(pattern) if {
	object.get(data.whose.config, ["forgetting", "patterns"], true)
	regex.match(`^[#@A-Za-z0-9 .:/+()-]{4,64}$`, pattern)
	regex.match(`[#@]`, pattern)
}

# METADATA
# description: the rules among those a record carries that bind it, and what becomes of it.
write_decision(id, carried) := {"action": action(bound), "rules": {r.id | some r in bound}} if {
	record := records[id]
	bound := [r | some r in carried; binds(record, r)]
}

records := {record.id: record | some record in object.get(input, "records", [])}

# A forgotten value binds the records its subject could be told of: those that
# concern them (held, said or about their mind) and those whose audience names them,
# a restatement by someone else in their hearing ("her PIN is 5532") among them. Not
# the rest of the tenant: a person's rule would otherwise mask any text in anyone's
# private notes (a rule on "that") and tell strangers where such a value sits.
binds(record, rule) if {
	rule.kind == "value"
	subjects.concerns(record, rule.subject)
}

binds(record, rule) if {
	rule.kind == "value"
	rule.subject in object.get(record, "audience", [])
}

# An officer's rule (set for a subject by someone else, as only an erasure officer
# may) binds every record of the tenant.
binds(_, rule) if {
	rule.kind == "value"
	rule.set_by != rule.subject
}

# A forgotten key or pattern binds the records that concern the rule's subject
# (held, said or about their mind): another person's "pin" is not theirs.
binds(record, rule) if {
	rule.kind == "key"
	record.proposition.key == rule.key
	subjects.concerns(record, rule.subject)
}

binds(record, rule) if {
	rule.kind == "pattern"
	subjects.concerns(record, rule.subject)
}

# METADATA
# description: |
#   What becomes of a record the rules bind: `refuse` when a key rule binds it (the
#   claim itself is what is forgotten) or config.forgetting.on_write says so;
#   `conceal` (every text field masked whole) when the writer is not the subject of
#   a rule that binds it; otherwise `redact` (the value or the pattern's match masked).
action(bound) := "keep" if {
	count(bound) == 0
} else := "refuse" if {
	refused(bound)
} else := "conceal" if {
	concealed(bound)
} else := "redact"

# A writer who is not the subject of a rule that binds the record gets it stored
# with every text field masked whole: a mask in place would show them where the
# value sits in what they wrote (a write of every four-digit number would find a PIN).
concealed(bound) if {
	some r in bound
	r.subject != input.asker.id
}

refused(_) if object.get(data.whose.config, ["forgetting", "on_write"], "redact") == "refuse"

refused(bound) if {
	some r in bound
	r.kind == "key"
}
