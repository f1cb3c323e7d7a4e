"""The embedders against real models: an ONNX model loaded from a local folder
(fastembed), and an OpenAI-compatible server on loopback serving the same model
(tests/embed_server.py), with its faults produced by the server itself."""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from sidecar.embed import EmbeddingUnavailable
from sidecar.embed.onnx import OnnxEmbedder
from sidecar.embed.remote import RemoteEmbedder
from sidecar.errors import Unavailable
from tests.embed_server import API_KEY, MODEL_NAME, EmbedServer, serving
from tests.models import DIM, PAIR, PAIR_SIMILARITY

TEXTS = ["caroline went to a support group", "melanie painted a sunset", *PAIR]


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(
        sum(x * x for x in a) * sum(y * y for y in b)
    )


@pytest.fixture(scope="module")
def server(minilm: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbedServer]:
    with serving(minilm, tmp_path_factory.mktemp("embed") / "server.log") as running:
        yield running


@pytest.fixture
async def remote(server: EmbedServer) -> AsyncIterator[RemoteEmbedder]:
    server.control()
    embedder = RemoteEmbedder(
        server.url, MODEL_NAME, DIM, api_key=API_KEY, timeout_s=1.0, retries=2, batch=8
    )
    yield embedder
    await embedder.close()
    server.control()


@pytest.fixture(scope="module")
def onnx(minilm: Path) -> OnnxEmbedder:
    embedder = OnnxEmbedder(minilm, "all-MiniLM-L6-v2", DIM)
    embedder.load()
    return embedder


async def test_the_local_model_reproduces_its_published_similarity(onnx: OnnxEmbedder) -> None:
    a, b = await onnx.embed_batch(list(PAIR), "document")
    assert len(a) == DIM
    assert cosine(a, b) == pytest.approx(PAIR_SIMILARITY, abs=0.01)
    assert onnx.name == "onnx:all-MiniLM-L6-v2"


async def test_the_remote_and_the_local_path_give_the_same_vectors(
    remote: RemoteEmbedder, onnx: OnnxEmbedder
) -> None:
    far = await remote.embed_batch(TEXTS, "query")
    near = await onnx.embed_batch(TEXTS, "query")
    for a, b in zip(far, near, strict=True):
        assert cosine(a, b) == pytest.approx(1.0, abs=1e-4)


async def test_writes_are_embedded_in_batches(remote: RemoteEmbedder, server: EmbedServer) -> None:
    before = server.stats()["requests"]
    vectors = await remote.embed_batch([f"turn {i}" for i in range(20)], "document")
    assert len(vectors) == 20
    assert server.stats()["requests"] - before == 3  # 8 + 8 + 4
    assert server.stats()["texts"][-3:] == [8, 8, 4]


@pytest.mark.parametrize(
    ("behaviour", "reason", "requests"),
    [
        ({"status": 503}, "http_503", 3),  # transient: tried 1 + 2 times, then 503
        ({"status": 429}, "http_429", 3),
        ({"delay_s": 2.5}, "timeout", 3),
        ({"status": 400}, "http_400", 1),  # a refusal: asking again changes nothing
        ({"short": True}, "bad_response", 1),
        ({"dim": 100}, "bad_response", 1),
        # Answers of the wrong form (issue 35: these were a bare 500).
        ({"body": {"data": ["x"] * len(TEXTS)}}, "bad_response", 1),
        ({"body": {"data": [None] * len(TEXTS)}}, "bad_response", 1),
        ({"body": {"data": [{"index": i} for i in range(len(TEXTS))]}}, "bad_response", 1),
        ({"body": ["not", "an", "object"]}, "bad_response", 1),
    ],
)
async def test_a_failing_endpoint_fails_closed_within_bounds(
    remote: RemoteEmbedder,
    server: EmbedServer,
    behaviour: dict[str, object],
    reason: str,
    requests: int,
) -> None:
    server.control(**behaviour)
    before = server.stats()["requests"]
    started = time.monotonic()
    with pytest.raises(EmbeddingUnavailable) as refused:
        await remote.embed_batch(TEXTS, "query")
    assert refused.value.reasons == [reason]
    assert isinstance(refused.value, Unavailable)
    assert server.stats()["requests"] - before == requests
    # Bounded: attempts x (timeout + backoff), never an open-ended wait.
    assert time.monotonic() - started < requests * (1.0 + 1.5) + 5


async def test_a_wrong_key_is_refused_without_retrying(server: EmbedServer) -> None:
    server.control()
    embedder = RemoteEmbedder(server.url, MODEL_NAME, DIM, api_key="wrong", retries=2)
    try:
        with pytest.raises(EmbeddingUnavailable) as refused:
            await embedder.embed_batch(["x"], "query")
    finally:
        await embedder.close()
    assert refused.value.reasons == ["http_401"]


async def test_an_endpoint_that_is_down_is_unreachable(minilm: Path, tmp_path: Path) -> None:
    with serving(minilm, tmp_path / "server.log") as running:
        url = running.url
    embedder = RemoteEmbedder(url, MODEL_NAME, DIM, api_key=API_KEY, retries=1)
    try:
        with pytest.raises(EmbeddingUnavailable) as refused:
            await embedder.embed_batch(["x"], "query")
    finally:
        await embedder.close()
    assert refused.value.reasons == ["unreachable"]


def test_a_model_folder_that_is_not_the_configured_model_refuses_in_one_line(
    minilm: Path, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match=r"returns 384-dimension vectors.*WHOSE_EMBED_DIM=384"):
        OnnxEmbedder(minilm, "all-MiniLM-L6-v2", 768).load()
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"no model\.onnx"):
        OnnxEmbedder(tmp_path / "empty", "nothing-here", 384).load()
    with pytest.raises(ValueError, match="is not a folder"):
        OnnxEmbedder(tmp_path / "missing", None, 384).load()
