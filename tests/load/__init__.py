"""Load-test smoke runs against a real sidecar."""
