"""whose: a policy-as-code authorization sidecar for agent memory."""

__version__ = "0.1.0"
