"""The lexical side of hybrid search: BM25 over what is indexed for a record.

Qdrant's own BM25 (qdrant-edge's `Bm25`, the model Qdrant's server runs as
`qdrant/bm25`): English tokenizer, lower-casing, English stop words and Snowball
stemmer. A record becomes a sparse vector of its terms' BM25 term-frequency weights
(saturation `k`, length normalisation `b` against `AVG_LEN`); a query becomes its
distinct terms. The inverse document frequency is the store's part: computed at query
time over the records the search may return, and nothing else (store/hybrid.py).

Texts about a person's life are short: a claim or a turn of a conversation is some 10
to 30 words, so lengths are normalised against 24 terms, not BM25's customary 256.
"""

from __future__ import annotations

from dataclasses import dataclass

import qdrant_edge as qe

K = 1.2
B = 0.75
AVG_LEN = 24.0
# Recorded with the collection: a change to the terms or their weights is a new name.
NAME = f"bm25-english-k{K}-b{B}-avg{AVG_LEN:g}"
# A query's distinct terms beyond this many are left out: each costs the server backend
# one count (its document frequency), and a question seldom has more.
MAX_QUERY_TERMS = 64


@dataclass(frozen=True)
class Sparse:
    indices: list[int]
    values: list[float]


class LexicalEncoder:
    name = NAME

    def __init__(self) -> None:
        self._bm25 = qe.Bm25(qe.Bm25Config(k=K, b=B, avg_len=AVG_LEN, language="english"))

    def document(self, text: str) -> Sparse:
        vector = self._bm25.embed_document(text)
        return Sparse(list(vector.indices), list(vector.values))

    def query(self, text: str) -> list[int]:
        """The query's distinct terms (their indices), at most MAX_QUERY_TERMS of them."""
        return list(self._bm25.embed_query(text).indices)[:MAX_QUERY_TERMS]


ENCODER = LexicalEncoder()
