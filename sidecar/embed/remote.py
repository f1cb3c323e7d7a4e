"""An OpenAI-compatible embeddings endpoint: `POST <base URL>/embeddings`.

OpenAI, Azure OpenAI (its `/openai/v1` base URL), Ollama (`/v1`), vLLM, Hugging Face
TEI and LM Studio all answer `{"model": m, "input": [texts]}` with
`{"data": [{"index": i, "embedding": [...]}, ...]}`.

Texts go in batches of at most `batch` per request (a write of 500 records is a few
requests, not 500). Each request has a timeout; a transient failure (connection
refused or reset, timeout, 429, 5xx) is tried again a bounded number of times with
jittered backoff. An answer that is not what was asked (another count, another
dimension, a value that is not a finite number) is no embedding at all. Whatever still
fails is EmbeddingUnavailable, with a short reason: the caller answers 503 and nothing
is searched or stored.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

import httpx
from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from sidecar.embed import EmbeddingUnavailable, EmbedPurpose

log = logging.getLogger(__name__)

# Largest answer read from the endpoint: a batch of 2048 vectors of 4096 floats is
# about 170 MB as JSON; anything past this bound is not an answer we asked for.
MAX_ANSWER_BYTES = 256 * 2**20


class _Transient(Exception):
    """A failure the same request may not meet again (tried again, within bounds)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class RemoteEmbedder:
    def __init__(
        self,
        base_url: str,
        model: str,
        dim: int,
        *,
        api_key: str | None = None,
        timeout_s: float = 10.0,
        retries: int = 2,
        batch: int = 64,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = base_url.rstrip("/") + "/embeddings"
        self.model = model
        self._dim = dim
        self.batch = batch
        self.attempts = 1 + retries
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout_s),
            headers=headers,
            follow_redirects=False,
            transport=transport,
        )

    @property
    def name(self) -> str:
        return f"openai-compatible:{self.model}"

    @property
    def dim(self) -> int:
        return self._dim

    async def close(self) -> None:
        await self.client.aclose()

    async def embed_batch(self, texts: Sequence[str], purpose: EmbedPurpose) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch):
            vectors += await self._request(list(texts[start : start + self.batch]))
        return vectors

    async def _request(self, texts: list[str]) -> list[list[float]]:
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.attempts),
            wait=wait_exponential_jitter(multiplier=0.1, max=1.0, jitter=0.1),
            retry=retry_if_exception(lambda exc: isinstance(exc, _Transient)),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    return await self._once(texts)
        except _Transient as exc:
            log.warning("embedding endpoint %s failed: %s", self.url, exc.reason)
            raise EmbeddingUnavailable(f"embedding failed: {exc.reason}", [exc.reason]) from None
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _once(self, texts: list[str]) -> list[list[float]]:
        try:
            response = await self.client.post(self.url, json={"model": self.model, "input": texts})
        except httpx.TimeoutException:
            raise _Transient("timeout") from None
        except httpx.TransportError:
            raise _Transient("unreachable") from None
        status = response.status_code
        if status == 429 or status >= 500:
            raise _Transient(f"http_{status}")
        if status != 200:
            # A refusal (bad key, unknown model): asking again changes nothing.
            log.warning("embedding endpoint refused: HTTP %d %s", status, response.text[:200])
            raise EmbeddingUnavailable(f"embedding refused: HTTP {status}", [f"http_{status}"])
        if len(response.content) > MAX_ANSWER_BYTES:
            raise EmbeddingUnavailable("embedding answer too large", ["bad_response"])
        try:
            return _vectors(response.json(), len(texts), self._dim)
        except (ValueError, TypeError, KeyError) as exc:
            log.warning("embedding endpoint answered unusably: %s", exc)
            raise EmbeddingUnavailable(f"bad embedding answer: {exc}", ["bad_response"]) from None


def _vectors(answer: Any, count: int, dim: int) -> list[list[float]]:
    """The vectors of an answer, in the order of the texts sent, each checked."""
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list) or len(data) != count:
        raise ValueError(f"{count} texts sent, {len(data) if isinstance(data, list) else 0} back")
    by_index: dict[int, list[float]] = {}
    for position, item in enumerate(data):
        if not isinstance(item, dict):
            raise ValueError("an answer item is not an object")
        index = item.get("index", position)
        embedding = item.get("embedding")
        if not isinstance(index, int) or not 0 <= index < count or index in by_index:
            raise ValueError("answer indexes are not those of the texts sent")
        if not isinstance(embedding, list) or len(embedding) != dim:
            raise ValueError(f"a vector is not {dim} numbers (set WHOSE_EMBED_DIM to the model's)")
        vector = [float(x) for x in embedding]
        if not all(math.isfinite(x) for x in vector) or not any(vector):
            raise ValueError("a vector holds a value that is not a finite number, or only zeros")
        by_index[index] = vector
    return [by_index[i] for i in range(count)]
