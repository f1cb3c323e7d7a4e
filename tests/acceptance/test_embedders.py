"""A served sidecar with a real embedding model: an OpenAI-compatible endpoint on
loopback (tests/embed_server.py) or an ONNX model in a folder; what it does when the
endpoint fails (no embedding, no search: 503 with the reason, nothing stored), and
that a store made with one model refuses to serve with another, in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import REPO, as_, free_ports, start_sidecar, stop
from tests.embed_server import API_KEY, MODEL_NAME, EmbedServer, serving
from tests.models import DIM

ALICE = as_("alice")


def remember(http: httpx.Client, text: str, speaker: str = "alice") -> httpx.Response:
    return http.post(
        "/v1/observations",
        headers=as_("extractor-bot", roles="extractor"),
        json={
            "speaker": speaker,
            "source_id": "chat-1",
            "participants": ["alice", "bob"],
            "said_at": "2026-05-08T10:00:00Z",
            "claims": [{"proposition": {"text": text}}],
        },
    )


@pytest.fixture(scope="module")
def server(minilm: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbedServer]:
    with serving(minilm, tmp_path_factory.mktemp("embed") / "server.log") as running:
        yield running


def remote_env(server: EmbedServer) -> dict[str, str]:
    return {
        "WHOSE_EMBED_URL": server.url,
        "WHOSE_EMBED_MODEL": MODEL_NAME,
        "WHOSE_EMBED_DIM": str(DIM),
        "WHOSE_EMBED_API_KEY": API_KEY,
        "WHOSE_EMBED_TIMEOUT_S": "1",
        "WHOSE_EMBED_RETRIES": "1",
    }


def test_recall_finds_what_was_meant_with_the_configured_model(
    server: EmbedServer, tmp_path: Path
) -> None:
    base, process = start_sidecar(tmp_path / "sidecar", remote_env(server))
    try:
        with httpx.Client(base_url=base, timeout=30) as http:
            for text in ("the team adopted a rescue puppy", "the quarterly budget was approved"):
                assert remember(http, text).status_code == 201
            # No shared word: only the model knows a dog is a puppy.
            for search in ("hybrid", "dense"):
                found = http.post(
                    "/v1/recall",
                    headers=ALICE,
                    json={"query": "did we get a dog?", "search": search, "limit": 1},
                ).json()
                assert "puppy" in found["items"][0]["content"], search
    finally:
        stop(process)


def test_no_embedding_no_search_and_nothing_stored(server: EmbedServer, tmp_path: Path) -> None:
    base, process = start_sidecar(tmp_path / "sidecar", remote_env(server))
    try:
        with httpx.Client(base_url=base, timeout=30) as http:
            assert remember(http, "the launch is October 17").status_code == 201
            server.control(status=503)
            try:
                refused = http.post("/v1/recall", headers=ALICE, json={"query": "launch?"})
                assert refused.status_code == 503
                assert refused.json() == {
                    "error": "embedding_unavailable",
                    "reasons": ["http_503"],
                }
                written = remember(http, "the launch moved to November")
                assert written.status_code == 503
                assert written.json()["error"] == "embedding_unavailable"
                # A search that needs no embedding still answers.
                lexical = http.post(
                    "/v1/recall", headers=ALICE, json={"query": "launch", "search": "lexical"}
                ).json()
            finally:
                server.control()
            assert [i["proposition"]["text"] for i in lexical["items"]] == [
                "the launch is October 17"
            ]
    finally:
        stop(process)


def test_a_store_made_with_another_model_refuses_to_serve_in_one_line(
    server: EmbedServer, tmp_path: Path
) -> None:
    data = tmp_path / "sidecar"
    _, process = start_sidecar(data)  # the hashing embedder makes the store
    stop(process)
    command = [sys.executable, "-m", "sidecar", "serve", "--dev", "--data-dir", str(data)]
    port, ops_port = free_ports(2)
    command += ["--port", str(port), "--ops-port", str(ops_port)]
    env = {**os.environ, **remote_env(server), "WHOSE_LOG_LEVEL": "CRITICAL"}
    done = subprocess.run(
        command, env=env, cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("configuration error: the store ")
    assert "holds vectors of hashing-v1 (384 dimensions" in last
    assert "openai-compatible:all-minilm-l6-v2 (384 dimensions" in last
    assert "whose reindex" in last


def test_a_local_onnx_model_serves_recall(minilm: Path, tmp_path: Path) -> None:
    env = {"WHOSE_EMBED_MODEL_DIR": str(minilm), "WHOSE_EMBED_MODEL": "all-MiniLM-L6-v2"}
    base, process = start_sidecar(tmp_path / "sidecar", env)
    try:
        with httpx.Client(base_url=base, timeout=30) as http:
            for text in ("the team adopted a rescue puppy", "the quarterly budget was approved"):
                assert remember(http, text).status_code == 201
            found = http.post(
                "/v1/recall", headers=ALICE, json={"query": "did we get a dog?", "limit": 1}
            ).json()
            assert "puppy" in found["items"][0]["content"]
    finally:
        stop(process)
