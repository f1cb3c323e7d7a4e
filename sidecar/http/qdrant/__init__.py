"""Qdrant's REST dialect, served by whose: its routes and its request and answer shapes."""
