"""Load tests for the sidecar: a locust mix, a seeding CLI, a headless fixed-rate runner."""
