package whose.lib.grants_test

import data.whose.lib.grants

grant := {"since": "2026-12-06T09:00:00Z", "until": "2026-12-11T23:59:59Z", "categories": ["appointments"]}

test_a_purpose_limits_what_it_serves if {
	grants.serves(grant, "recall")
	grants.serves(object.union(grant, {"purpose": "recall"}), "recall")
	not grants.serves(object.union(grant, {"purpose": "recall"}), "history")
}

test_it_reaches_records_of_its_categories_only if {
	grants.reaches(grant, {"categories": ["clinical", "appointments"]})
	not grants.reaches(grant, {"categories": ["clinical"]})
	not grants.reaches(grant, {})
}
