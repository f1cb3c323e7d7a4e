"""Who is asking: verified tokens, their keys, and the identity they carry."""
