# METADATA
# scope: package
# description: |
#   Labeling: whose is a document a RAG library writes, and who may read it?
#
#   A document written through the Qdrant dialect carries its library's metadata as
#   the application keeps it (an ACL list, an owner, a department, a path). This
#   policy maps that metadata to the labels a perspective record needs: its audience
#   (who may read it), holder (whose view it is), author (whose words), source, and
#   optionally access scope, modality and source kind. The write policy (whose.ingest)
#   then decides the labelled record as any other.
#
#   Which metadata keys give each label is data (data.whose.config.labeling), so a
#   security team maps an application's own keys without editing rules; unset, it is
#   the convention writes/documents.py documents (`audience`, `source_id`, `holder`,
#   `author`, ...). `rules` add labels by where a document sits: a metadata value's
#   prefix (a path) or exact value (a department), or its collection. Categories
#   (what a subject's grant discloses by, whose.consent) are those the metadata names
#   and those of every matching rule together; the write policy refuses a name
#   outside the tenant's vocabulary.
#
#   Default deny: a document without readers or a source gets no labels, only the
#   reasons naming the label that is missing.
#
#   Input: {writer, collection?, documents: [{library, document_id?, metadata,
#   text_length?, previous_holder?}]}; answer: for each document, in order, either
#   {labels: {audience, holder?, author, source_id, access_scope?, categories?,
#   modality, source_kind, from}} or {reasons: [...]}.
# schemas:
#   - input: schema.labeling_input
#   - data.whose.config: schema.config
package whose.labeling

import data.whose.config

# METADATA
# description: for each document of the input, in order, its labels or the reasons it has none.
# entrypoint: true
decisions := [decide(document) | some document in input.documents]

# METADATA
# description: the decision for one document - labels only when no rule refuses it.
decide(document) := {"reasons": denials(document)} if {
	count(denials(document)) > 0
} else := {"labels": labels(document)}

# METADATA
# description: |
#   The labeling settings (data.whose.config.labeling), each falling back to the
#   convention when unset.
setting(name) := object.get(object.get(config, "labeling", {}), name, defaults[name])

# METADATA
# description: |
#   The metadata keys a label is read from for a document: the settings' keys, then
#   its library's own (library_keys).
keys(document, name) := array.concat(
	setting(name),
	object.get(object.get(library_keys, document.library, {}), name, []),
)

# METADATA
# description: |
#   Keys a library writes that name a label, read after the settings' keys. mem0 keeps
#   a memory for one user (`user_id`): that user reads it and holds it, and it comes
#   from that user's session (`run_id`), else from the user.
library_keys := {"mem0": {
	"audience_keys": ["user_id"],
	"holder_keys": ["user_id"],
	"source_keys": ["run_id", "user_id"],
}}

# METADATA
# description: the convention of writes/documents.py - the metadata keys each label is read from.
defaults := {
	"audience_keys": ["audience"],
	"holder_keys": ["holder"],
	"author_keys": ["author"],
	"source_keys": ["source_id", "source", "file_path"],
	"scope_keys": ["access_scope"],
	"category_keys": ["categories"],
	"rules": [],
}

# METADATA
# description: every reason the document gets no labels (empty means labelled).
denials(document) := union({
	audience_denials(document),
	source_denials(document),
	scope_denials(document),
})

# A document nobody may read is refused, naming the label to add.
audience_denials(document) := {"missing_metadata:audience" | not has_audience(document)}

has_audience(document) if count(audience(document)) > 0

# A document must say where it comes from (its id, when its library gives one, will do).
source_denials(document) := {"missing_metadata:source" | not source(document)}

# One scope, or none: the document's own and every matching rule's must agree.
scope_denials(document) := {"conflicting_access_scope" | count(scopes(document)) > 1}

# METADATA
# description: the labels of a document no rule refuses; holder and access scope only when there is one.
labels(document) := object.union_n([
	{
		"audience": audience(document),
		"author": author(document),
		"source_id": source(document),
		"modality": object.get(document.metadata, "modality", "asserted"),
		"source_kind": object.get(document.metadata, "source_kind", "document"),
		"from": from(document),
	},
	{"holder": holder | holder := holder_of(document)},
	{"access_scope": scope | some scope in scopes(document)},
	{"categories": sorted | sorted := sort(categories(document)); count(sorted) > 0},
])

# METADATA
# description: |
#   The document's categories: those its metadata names (a string is one) and those
#   of every rule that matches it.
categories(document) := {category |
	[_, named] := first(document.metadata, keys(document, "category_keys"))
	some category in as_list(named)
} | {category |
	some rule in matching(document)
	some category in object.get(rule, "categories", [])
}

# METADATA
# description: |
#   The first of `names` the metadata gives a value (anything but null, "", [] or {}),
#   as [name, value]; undefined when none does.
first(metadata, names) := [name, metadata[name]] if {
	given := [name | some name in names; present(metadata, name)]
	name := given[0]
}

present(metadata, name) if {
	value := metadata[name]
	not value in {null, "", [], {}}
}

# METADATA
# description: |
#   Who may read the document: the readers its metadata names (a string is one
#   reader), else the audiences of the rules that match it.
audience(document) := as_list(readers) if {
	[_, readers] := first(document.metadata, keys(document, "audience_keys"))
} else := sort({reader |
	some rule in matching(document)
	some reader in object.get(rule, "audience", [])
})

as_list(value) := [value] if is_string(value)

as_list(value) := value if not is_string(value)

# METADATA
# description: where the document comes from - its source metadata, else its library's document id.
source(document) := value if {
	[_, value] := first(document.metadata, keys(document, "source_keys"))
} else := document.document_id if is_string(document.document_id)

# METADATA
# description: |
#   Whose view the document is: the holder its metadata names, else its author, else
#   (for a payload update) the holder of the version it changes, else its writer.
voice(document) := value if {
	[_, value] := first(document.metadata, keys(document, "holder_keys"))
} else := value if {
	[_, value] := first(document.metadata, setting("author_keys"))
} else := document.previous_holder if {
	is_string(document.previous_holder)
} else := input.writer.id

# METADATA
# description: |
#   The holder label: the voice, except for world state no holder key names (a claim
#   about the world has no holder: it is its author's word).
holder_of(document) := voice(document) if not unheld(document)

unheld(document) if {
	object.get(document.metadata, "modality", null) == "world_state"
	not first(document.metadata, keys(document, "holder_keys"))
}

# METADATA
# description: whose words the document is - the author its metadata names, else its holder.
author(document) := value if {
	[_, value] := first(document.metadata, setting("author_keys"))
} else := voice(document)

# METADATA
# description: the access scopes the document names itself and those of the rules that match it.
scopes(document) := {scope | [_, scope] := first(document.metadata, setting("scope_keys"))} | {scope |
	some rule in matching(document)
	scope := rule.access_scope
	is_string(scope)
}

# METADATA
# description: the metadata key each label was read from (for the writer to know which to fix).
from(document) := {label: name |
	some label, names in {
		"audience": keys(document, "audience_keys"),
		"holder": keys(document, "holder_keys"),
		"author": keys(document, "author_keys"),
		"source_id": keys(document, "source_keys"),
		"access_scope": keys(document, "scope_keys"),
		"categories": keys(document, "category_keys"),
	}
	[name, _] := first(document.metadata, names)
}

# METADATA
# description: the rules of config.labeling.rules that match the document.
matching(document) := [rule |
	some rule in setting("rules")
	in_collection(rule)
	matches_key(rule, document.metadata)
]

in_collection(rule) if object.get(rule, "collection", null) == null

in_collection(rule) if rule.collection == input.collection

matches_key(rule, _) if object.get(rule, "key", null) == null

# METADATA
# description: the rule's key holds a string starting with its prefix (a path under a folder).
matches_key(rule, metadata) if {
	value := metadata[rule.key]
	is_string(value)
	is_string(rule.prefix)
	startswith(value, rule.prefix)
}

# METADATA
# description: the rule's key holds exactly its value (a department).
matches_key(rule, metadata) if {
	is_string(rule.equals)
	metadata[rule.key] == rule.equals
}
