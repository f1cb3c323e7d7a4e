package whose.retention_test

import data.whose.retention

record := {
	"id": "r1",
	"tenant": "acme",
	"observer_id": "alice",
	"modality": "observed",
	"source_id": "room-1",
	"source": {"kind": "perception"},
	"access_scope": "launch-core",
	"recorded_at": "2026-10-01T00:00:00Z",
}

decide(now, rules) := decision if {
	decision := retention.decisions.r1 with input as {"records": [record], "now": now}
		with data.whose.config.retention.rules as rules
}

test_no_rule_keeps_everything if not decide("2036-01-01T00:00:00Z", []).expire

test_older_than_its_rule_expires if decide("2026-11-01T00:00:00Z", [{"max_age_days": 30}]).expire

test_younger_than_its_rule_stays if not decide("2026-10-20T00:00:00Z", [{"max_age_days": 30}]).expire

test_the_shortest_covering_rule_applies if {
	rules := [{"max_age_days": 365}, {"modality": "observed", "max_age_days": 7}]
	decide("2026-10-09T00:00:00Z", rules).expire
}

test_a_rule_for_another_modality_does_not_cover if {
	not decide("2026-11-01T00:00:00Z", [{"modality": "believed", "max_age_days": 1}]).expire
}

test_rules_by_tenant_source_and_scope if {
	decide("2026-11-01T00:00:00Z", [{
		"tenant": "acme", "source_kind": "perception", "source_id": "room-1",
		"access_scope": "launch-core", "max_age_days": 1,
	}]).expire
	not decide("2026-11-01T00:00:00Z", [{"tenant": "globex", "max_age_days": 1}]).expire
	not decide("2026-11-01T00:00:00Z", [{"source_id": "room-2", "max_age_days": 1}]).expire
}

test_a_legal_hold_keeps_an_expired_record if {
	d := decide("2026-11-01T00:00:00Z", [{"max_age_days": 1}]) with data.whose.holds as {"tenants": {"acme": {"records": [], "subjects": ["alice"]}}}
	not d.expire
	d.held
}

test_derived_records_follow_the_erasure_config if {
	decide("2026-11-01T00:00:00Z", []).derived == "flag"
	d := decide("2026-11-01T00:00:00Z", []) with data.whose.config.erasure.on_derived as "withdraw"
	d.derived == "withdraw"
}

test_shortest_max_age_over_every_rule if {
	days := retention.shortest_max_age_days with data.whose.config.retention.rules as [{"max_age_days": 30}, {"tenant": "acme", "max_age_days": 7}]
	days == 7
}

test_no_shortest_max_age_without_rules if {
	not retention.shortest_max_age_days with data.whose.config.retention.rules as []
}
