package whose.lib.categories_test

import data.whose.lib.categories

shared := {"consent": {"categories": ["appointments", "clinical"], "tenants": {"clinic": ["billing"]}}}

test_a_tenant_without_a_list_of_its_own_uses_the_shared_vocabulary if {
	categories.vocabulary("acme") == ["appointments", "clinical"] with data.whose.config as shared
}

test_a_tenant_list_replaces_the_shared_vocabulary if {
	categories.vocabulary("clinic") == ["billing"] with data.whose.config as shared
	categories.unknown("clinic", ["appointments", "billing"]) == {"appointments"} with data.whose.config as shared
}

test_unset_no_category_is_known if {
	categories.unknown("acme", ["appointments"]) == {"appointments"} with data.whose.config as {}
}

test_known_names_are_not_unknown if {
	categories.unknown("acme", ["clinical"]) == set() with data.whose.config as shared
}
