"""What a request handler can reach: built once at start-up by app.py."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from sidecar.embed import HashingEmbedder
from sidecar.identity import Authenticator
from sidecar.ingest import Writer
from sidecar.policy import PolicyClient
from sidecar.recall import Bounds
from sidecar.settings import Settings
from sidecar.store import Store


@dataclass
class Services:
    settings: Settings
    store: Store
    policy: PolicyClient
    writer: Writer
    embedder: HashingEmbedder
    bounds: Bounds
    authenticate: Authenticator


def services(request: Request) -> Services:
    return request.app.state.services  # type: ignore[no-any-return]
