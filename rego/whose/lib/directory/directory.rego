# METADATA
# scope: package
# description: |
#   Who is in which group and who holds which clearance or role.
#
#   An identity is {"id", "tenant"} plus, for a verified token's bearer, the
#   token's "groups", "scopes" and "roles" claims. Everyone else is known only
#   through the tenant directory in data.whose.directory: a token speaks for its
#   bearer alone.
# schemas:
#   - data.whose.config: schema.config
#   - data.whose.directory: schema.directory
package whose.lib.directory

# METADATA
# description: the directory entry of the identity's tenant.
tenant_of(identity) := data.whose.directory.tenants[identity.tenant]

# METADATA
# description: identity belongs to group (a bare name, without "group:").
member_of(identity, group) if identity.id in tenant_of(identity).groups[group]

member_of(identity, group) if group in identity.groups

# METADATA
# description: the members the tenant's directory lists in group (none for a group it does not define).
members_of(tenant, group) := object.get(data.whose.directory.tenants, [tenant, "groups", group], [])

# METADATA
# description: the tenant's directory defines group (a bare name, without "group:"); token claims cannot.
defines_group(tenant, group) if group in object.keys(data.whose.directory.tenants[tenant].groups)

# METADATA
# description: every group (bare name) identity belongs to, in its tenant's directory or by its own token.
groups_of(identity) := {group |
	some group, members in tenant_of(identity).groups
	identity.id in members
} | {group | some group in identity.groups}

# METADATA
# description: every scope identity is cleared for, in its tenant's directory or by its own token.
clearances_of(identity) := {scope | some scope in tenant_of(identity).principals[identity.id].scopes} | {scope | some scope in identity.scopes}

# METADATA
# description: identity holds clearance for scope.
cleared_for(identity, scope) if scope in tenant_of(identity).principals[identity.id].scopes

cleared_for(identity, scope) if scope in identity.scopes

# METADATA
# description: identity holds role.
has_role(identity, role) if role in tenant_of(identity).principals[identity.id].roles

has_role(identity, role) if role in identity.roles

# METADATA
# description: a record's audience admits identity, by name or through a group.
admits(record, identity) if identity.id in record.audience

admits(record, identity) if {
	some entry in record.audience
	startswith(entry, "group:")
	member_of(identity, trim_prefix(entry, "group:"))
}

# METADATA
# description: identity may see the record's access scope, or the record has none.
clears_scope(record, _) if not record.access_scope

clears_scope(record, identity) if cleared_for(identity, record.access_scope)
