package whose.labeling_test

import data.whose.labeling

writer := {"id": "confluence-sync", "tenant": "acme"}

readers := {"audience": ["alice", "bob"], "source": "offsite.md"}

document(metadata) := {"library": "langchain", "metadata": metadata}

# The decisions for documents, under the labeling settings given ({}: the convention).
decided(documents, settings) := result if {
	result := labeling.decisions with input as {"writer": writer, "collection": "kb", "documents": documents}
		with data.whose.config.labeling as settings
}

decision(metadata, settings) := result if {
	[result] := decided([document(metadata)], settings)
}

labels(metadata, settings) := decision(metadata, settings).labels

# A team whose documents keep an ACL, an owner and a path (docs/policies.md).
team := {"audience_keys": ["acl", "allowed_users"], "holder_keys": ["owner"], "source_keys": ["path"]}

roadmap := {"acl": ["bob", "carol"], "owner": "alice", "path": "/eng/roadmap.md"}

# --- the convention ---------------------------------------------------------------

test_the_convention_without_settings if {
	[result] := labeling.decisions with input as {"writer": writer, "documents": [document(readers)]}
	result == {"labels": {
		"audience": ["alice", "bob"],
		"holder": "confluence-sync",
		"author": "confluence-sync",
		"source_id": "offsite.md",
		"modality": "asserted",
		"source_kind": "document",
		"from": {"audience": "audience", "source_id": "source"},
	}}
}

test_a_reader_named_alone_is_a_list if labels({"audience": "alice", "source_id": "s"}, {}).audience == ["alice"]

test_source_keys_in_order if {
	labels(object.union(readers, {"source_id": "first", "file_path": "third"}), {}).source_id == "first"
	labels({"audience": "a", "file_path": "f.md"}, {}).source_id == "f.md"
}

test_the_library_document_id_is_the_source_when_none_is_named if {
	[result] := decided([{"library": "llamaindex", "document_id": "doc-1", "metadata": {"audience": "a"}}], {})
	result.labels.source_id == "doc-1"
}

test_author_and_holder_name_whose_claim_it_is if {
	by_author := labels(object.union(readers, {"author": "carol"}), {})
	[by_author.holder, by_author.author] == ["carol", "carol"]
	held := labels(object.union(readers, {"holder": "dave", "author": "carol"}), {})
	[held.holder, held.author] == ["dave", "carol"]
}

test_a_payload_update_stays_its_holders if {
	[result] := decided([object.union(document(readers), {"previous_holder": "alice"})], {})
	[result.labels.holder, result.labels.author] == ["alice", "alice"]
}

test_world_state_has_no_holder_but_its_author if {
	result := labels(object.union(readers, {"author": "ops", "modality": "world_state"}), {})
	not result.holder
	result.author == "ops"
	result.modality == "world_state"
}

test_world_state_with_a_holder_keeps_it if {
	labels(object.union(readers, {"holder": "ops", "modality": "world_state"}), {}).holder == "ops"
}

test_modality_source_kind_and_scope_as_written if {
	result := labels(object.union(readers, {"modality": "believed", "source_kind": "conversation", "access_scope": "launch-core"}), {})
	[result.modality, result.source_kind, result.access_scope] == ["believed", "conversation", "launch-core"]
	result.from.access_scope == "access_scope"
}

test_empty_values_name_nothing if {
	decision({"audience": [], "source": ""}, {}).reasons == {"missing_metadata:audience", "missing_metadata:source"}
	labels(object.union(readers, {"holder": null}), {}).holder == "confluence-sync"
}

# --- default deny --------------------------------------------------------------------

test_a_document_without_readers_or_source_is_refused_naming_both if {
	result := decision({}, {})
	result.reasons == {"missing_metadata:audience", "missing_metadata:source"}
	not result.labels
}

test_without_readers_is_refused if decision({"source": "s"}, {}).reasons == {"missing_metadata:audience"}

test_without_a_source_is_refused if decision({"audience": "a"}, {}).reasons == {"missing_metadata:source"}

test_every_document_is_answered_in_order if {
	results := decided([document({}), document(readers)], {})
	results[0].reasons == {"missing_metadata:audience", "missing_metadata:source"}
	results[1].labels.audience == ["alice", "bob"]
}

# --- a team's own keys ----------------------------------------------------------------

test_a_teams_acl_owner_and_path if {
	labels(roadmap, team) == {
		"audience": ["bob", "carol"],
		"holder": "alice",
		"author": "alice",
		"source_id": "/eng/roadmap.md",
		"modality": "asserted",
		"source_kind": "document",
		"from": {"audience": "acl", "holder": "owner", "source_id": "path"},
	}
}

test_the_first_key_with_a_value_wins if {
	labels({"allowed_users": ["dave"], "path": "p"}, team).audience == ["dave"]
	labels({"acl": [], "allowed_users": "dave", "path": "p"}, team).audience == ["dave"]
}

test_mapped_keys_replace_the_convention if {
	# With acl mapped, an `audience` key is just metadata.
	decision({"audience": ["bob"], "path": "p"}, team).reasons == {"missing_metadata:audience"}
}

test_author_and_scope_keys if {
	result := labels({"acl": "bob", "path": "p", "by": "carol", "label": "eng-only"}, object.union(team, {"author_keys": ["by"], "scope_keys": ["label"]}))
	[result.holder, result.author, result.access_scope] == ["carol", "carol", "eng-only"]
}

# --- a library's own keys: mem0 -------------------------------------------------------

mem0(metadata, settings) := result if {
	[result] := decided([{"library": "mem0", "metadata": metadata}], settings)
}

memory := {"user_id": "alice", "role": "user", "hash": "h", "created_at": "2025-01-01T00:00:00-08:00"}

test_a_mem0_memory_is_its_users if {
	mem0(memory, {}) == {"labels": {
		"audience": ["alice"],
		"holder": "alice",
		"author": "alice",
		"source_id": "alice",
		"modality": "asserted",
		"source_kind": "document",
		"from": {"audience": "user_id", "holder": "user_id", "source_id": "user_id"},
	}}
}

test_a_mem0_memory_comes_from_its_run if mem0(object.union(memory, {"run_id": "chat-7"}), {}).labels.source_id == "chat-7"

test_a_mem0_memorys_own_labels_come_first if {
	labels := mem0(object.union(memory, {"acl": ["alice", "bob"], "owner": "alice"}), team).labels
	labels.audience == ["alice", "bob"]
	labels.from.holder == "owner"
}

test_a_mem0_memory_without_a_user_is_refused if {
	mem0({"agent_id": "planner", "hash": "h"}, {}).reasons == {"missing_metadata:audience", "missing_metadata:source"}
}

test_user_id_names_no_one_for_another_library if {
	decision({"user_id": "alice"}, {}).reasons == {"missing_metadata:audience", "missing_metadata:source"}
}

# --- rules: labels by where a document sits --------------------------------------------

hr_rules := {"rules": [
	{"key": "path", "prefix": "/hr/", "access_scope": "hr", "audience": ["group:hr"]},
	{"key": "department", "equals": "legal", "audience": ["group:legal"]},
	{"collection": "kb", "key": "path", "prefix": "/hr/payroll/", "audience": ["payroll-bot"]},
	{"collection": "other", "audience": ["group:other"]},
]}

test_a_prefix_rule_gives_scope_and_default_readers if {
	result := labels({"path": "/hr/policy.md", "source": "s"}, hr_rules)
	result.audience == ["group:hr"]
	result.access_scope == "hr"
}

test_a_prefix_rule_scopes_a_document_that_names_its_readers if {
	result := labels({"path": "/hr/policy.md", "audience": ["bob"], "source": "s"}, hr_rules)
	[result.audience, result.access_scope] == [["bob"], "hr"]
}

test_an_equals_rule_matches_exactly if {
	labels({"department": "legal", "source": "s"}, hr_rules).audience == ["group:legal"]
	decision({"department": "legal-ops", "source": "s"}, hr_rules).reasons == {"missing_metadata:audience"}
}

test_matching_rules_together_in_their_collection if {
	labels({"path": "/hr/payroll/may.csv", "source": "s"}, hr_rules).audience == ["group:hr", "payroll-bot"]
}

test_a_rule_for_another_collection_does_not_apply if {
	decision({"path": "/eng/x.md", "source": "s"}, hr_rules).reasons == {"missing_metadata:audience"}
}

test_a_rule_without_key_covers_its_whole_collection if {
	rules := {"rules": [{"collection": "kb", "access_scope": "kb-readers"}]}
	labels(readers, rules).access_scope == "kb-readers"
}

test_a_key_without_prefix_or_equals_matches_nothing if {
	rules := {"rules": [{"key": "path", "audience": ["everyone"]}]}
	decision({"path": "/x", "source": "s"}, rules).reasons == {"missing_metadata:audience"}
}

test_a_prefix_needs_a_string_value if {
	decision({"path": ["/hr/x"], "source": "s"}, hr_rules).reasons == {"missing_metadata:audience"}
}

test_a_document_cannot_name_another_scope_than_its_folders if {
	result := decision({"path": "/hr/x.md", "access_scope": "public", "source": "s"}, hr_rules)
	result.reasons == {"conflicting_access_scope"}
}

test_the_same_scope_twice_is_one if {
	labels({"path": "/hr/x.md", "access_scope": "hr", "source": "s"}, hr_rules).access_scope == "hr"
}

# --- categories: what a subject's grant discloses by (whose.consent) ----------------------

clinic_rules := {"rules": [
	{"key": "path", "prefix": "/clinic/calendar/", "categories": ["appointments"]},
	{"key": "path", "prefix": "/clinic/", "categories": ["clinical"]},
]}

test_categories_from_the_metadata_and_every_matching_rule if {
	result := labels(object.union(readers, {"path": "/clinic/calendar/may.ics", "categories": "logistics"}), clinic_rules)
	result.categories == ["appointments", "clinical", "logistics"]
	result.from.categories == "categories"
	labels(object.union(readers, {"path": "/clinic/notes.md"}), clinic_rules).categories == ["clinical"]
}

test_a_document_without_categories_carries_none if {
	not labels(readers, clinic_rules).categories
	labels(object.union(readers, {"categories": ["appointments", "clinical"]}), {}).categories == ["appointments", "clinical"]
}
