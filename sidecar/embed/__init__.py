"""Text to vectors, for queries and records that come without one."""
