"""Text embedders: one small interface, three implementations.

- hashing.py: the offline feature-hashing embedder (demo and tests; the default);
- remote.py: any OpenAI-compatible `/embeddings` endpoint (OpenAI, Azure, Ollama, vLLM,
  TEI, LM Studio), with batching, timeouts and bounded retries;
- onnx.py: an ONNX model in a local folder, in-process through fastembed, never
  downloading anything.

An embedder that cannot embed raises `EmbeddingUnavailable`: the request answers 503
with the reason, and nothing is searched or stored (never a silent fallback to another
model, whose vectors would not be comparable with the stored ones). The model and the
dimension are recorded with the collection (`IndexSpec`, store/); a store made with
another model refuses to open.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from sidecar.errors import EmbeddingUnavailable as EmbeddingUnavailable

# Some models embed a question differently from a passage (e5's "query: ").
EmbedPurpose = Literal["query", "document"]


class Embedder(Protocol):
    """Texts in, one vector each out, in order, all `dim` long (or EmbeddingUnavailable)."""

    # What the vectors mean, recorded with the collection: "hashing-v1",
    # "openai-compatible:<model>", "onnx:<model>".
    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    async def embed_batch(
        self, texts: Sequence[str], purpose: EmbedPurpose
    ) -> list[list[float]]: ...

    async def close(self) -> None: ...
