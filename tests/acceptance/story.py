"""The launch-date story's records and the HTTP calls the design tests make."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from tests.conftest import as_


def fresh_key() -> str:
    """A proposition key of its own: one holder's views of one key form a chain, and
    tests sharing a sidecar must not supersede each other's records."""
    return f"launch.date.{uuid.uuid4().hex[:8]}"


def launch_17(key: str) -> dict[str, str]:
    return {"text": "the launch is October 17", "key": key, "value": "2026-10-17"}


def launch_24(key: str) -> dict[str, str]:
    return {"text": "the launch is October 24", "key": key, "value": "2026-10-24"}


def said_by(speaker: str, session: str, **fields: Any) -> dict[str, Any]:
    """A claim held by the speaker, from a conversation the speaker took part in."""
    record: dict[str, Any] = {
        "proposition": launch_17(fresh_key()),
        "observer_id": speaker,
        "source_id": session,
        "source": {"kind": "conversation", "speaker": speaker},
        "modality": "reported_belief",
        "confidence": 0.78,
        "audience": [speaker],
        "valid_at": "2026-10-01T09:00:00Z",
    }
    record.update(fields)
    record.setdefault("content", f"{speaker} believes {record['proposition']['text']}")
    return record


def write(http: httpx.Client, who: str, records: Any) -> httpx.Response:
    return http.post("/v1/memories", json=records, headers=as_(who))


def stored(http: httpx.Client, who: str, records: Any) -> list[dict[str, Any]]:
    response = write(http, who, records)
    assert response.status_code == 201, response.text
    return list(response.json()["records"])


def recall(http: httpx.Client, who: str, **body: Any) -> httpx.Response:
    return http.post("/v1/recall", json=body, headers=as_(who))
