"""A small, deterministic, offline text embedder for text queries and records.

Feature hashing over words, word pairs and character trigrams: no model files,
no network, the same vector in every process. It finds records that share
words with the query, which is what the demo and tests need; production stacks
usually embed with their own model and pass `vector` instead.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
import re
from collections.abc import Sequence

from sidecar.embed import EmbedPurpose

_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder:
    # Recorded with the collection: a change to the features is a new name (and a reindex).
    name = "hashing-v1"

    def __init__(self, dim: int) -> None:
        self.dim = dim

    async def embed_batch(self, texts: Sequence[str], purpose: EmbedPurpose) -> list[list[float]]:
        # Microseconds a text: no reason to leave the event loop.
        return [self.embed(text) for text in texts]

    async def close(self) -> None:
        return None

    def embed(self, text: str) -> list[float]:
        vector = [0.0] * self.dim
        reached = set()
        for feature, weight in _features(text):
            bucket, sign = _hashed(feature, self.dim)
            vector[bucket] += sign * weight
            reached.add(bucket)
        # Only the buckets a feature reached can be other than 0.0, and adding or
        # dividing 0.0 changes nothing: summing and scaling those alone, in bucket
        # order, gives the vector of the whole-vector loops bit for bit.
        touched = sorted(reached)
        norm = math.sqrt(sum(vector[i] * vector[i] for i in touched))
        if norm == 0.0:
            # Empty text still needs a valid direction for cosine search.
            vector[0] = 1.0
            return vector
        for i in touched:
            vector[i] /= norm
        return vector


# Words and trigrams recur across texts: each is hashed once (bounded; same result).
@functools.lru_cache(maxsize=65_536)
def _hashed(feature: str, dim: int) -> tuple[int, float]:
    """The feature's bucket and sign."""
    digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
    return int.from_bytes(digest[:4], "little") % dim, 1.0 if digest[4] & 1 else -1.0


def _features(text: str) -> list[tuple[str, float]]:
    words = _WORD.findall(text.lower())
    features = [(f"w:{word}", 1.0) for word in words]
    features += [(f"b:{a} {b}", 0.5) for a, b in itertools.pairwise(words)]
    for word in words:
        padded = f"^{word}$"
        features += [(f"c:{padded[i : i + 3]}", 0.25) for i in range(len(padded) - 2)]
    return features
