package whose.lib.validity_test

import data.whose.lib.validity

open_ended := {"valid_at": "2026-10-01T00:00:00Z"}

closed := {"valid_at": "2026-10-01T00:00:00Z", "invalid_at": "2026-10-05T00:00:00Z"}

test_current_after_start if validity.current_at(open_ended, "2026-10-02T00:00:00Z")

test_current_at_exact_start if validity.current_at(open_ended, "2026-10-01T00:00:00Z")

test_not_current_before_start if not validity.current_at(open_ended, "2026-09-30T23:59:59Z")

test_current_before_end if validity.current_at(closed, "2026-10-04T23:59:59Z")

test_not_current_at_exact_end if not validity.current_at(closed, "2026-10-05T00:00:00Z")

test_not_current_without_valid_at if not validity.current_at({}, "2026-10-02T00:00:00Z")

test_unparseable_end_counts_as_ended if not validity.current_at({"valid_at": "2026-10-01T00:00:00Z", "invalid_at": "soon"}, "2026-10-02T00:00:00Z")

test_offsets_compare_as_instants if validity.current_at({"valid_at": "2026-10-01T02:00:00+02:00"}, "2026-10-01T00:00:00Z")

test_current_at_ns_takes_the_instant_parsed if {
	validity.current_at_ns(closed, time.parse_rfc3339_ns("2026-10-04T23:59:59Z"))
	not validity.current_at_ns(closed, time.parse_rfc3339_ns("2026-10-05T00:00:00Z"))
}
