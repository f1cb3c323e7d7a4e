"""Benchmarks: scripts that print medians and ratios (never timed tests)."""
