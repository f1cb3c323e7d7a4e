# METADATA
# scope: package
# description: |
#   Valid time: when a claim applied. Timestamps are RFC 3339 strings.
# schemas:
#   - data.whose.config: schema.config
#   - data.whose.directory: schema.directory
package whose.lib.validity

# METADATA
# description: the record applied at instant t (valid_at <= t < invalid_at).
current_at(record, t) if current_at_ns(record, time.parse_rfc3339_ns(t))

# METADATA
# description: current_at, for an instant already parsed (nanoseconds since 1970), so a caller deciding many records parses it once.
current_at_ns(record, t) if {
	time.parse_rfc3339_ns(record.valid_at) <= t
	not ended_by(record, t)
}

ended_by(record, t) if time.parse_rfc3339_ns(record.invalid_at) <= t

# An unparseable end is treated as ended, so a bad timestamp can only narrow.
ended_by(record, _) if {
	record.invalid_at
	not time.parse_rfc3339_ns(record.invalid_at)
}
