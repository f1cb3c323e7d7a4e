"""The policy: OPA (a server or our own), the decision contract, pushdown and the decision cache."""
