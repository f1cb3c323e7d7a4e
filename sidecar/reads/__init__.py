"""Disclosed reads: the gate every read goes through, the allow rate, the one read path."""
