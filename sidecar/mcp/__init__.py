"""The Model Context Protocol transport: whose's memory as tools an agent can call."""
