# METADATA
# scope: package
# description: |
#   Categories: the names a record may carry and a grant may name ("appointments",
#   "clinical"), from the tenant's vocabulary (data.whose.config.consent: a
#   tenant's own list under `tenants`, else the shared `categories`). A name outside
#   it is refused where it is written: by the write policy on a record, by the
#   consent policy on a grant. Unset: no category is known, so none can be written.
# schemas:
#   - data.whose.config: schema.config
package whose.lib.categories

import data.whose.config

# METADATA
# description: the categories a tenant's records and grants may name.
vocabulary(tenant) := object.get(
	object.get(config, ["consent", "tenants"], {}),
	tenant,
	object.get(config, ["consent", "categories"], []),
)

# METADATA
# description: the names of `names` the tenant's vocabulary does not hold.
unknown(tenant, names) := {name |
	some name in names
	not name in vocabulary(tenant)
}
