"""The lexical side of hybrid search: BM25 term weights, with no corpus statistics.

Qdrant's own BM25 tokenizer (qdrant-edge's `Bm25`, the model Qdrant's server runs as
`qdrant/bm25`): English tokenizer, lower-casing, English stop words and Snowball
stemmer. A record becomes a sparse vector of its terms' BM25 term-frequency weights
(saturation `k`, length normalisation `b` against `AVG_LEN`); a query becomes its
distinct terms, each of weight 1. A record's lexical score is the sum of its weights for
the query's terms: a function of the record and the query alone.

No inverse document frequency. An IDF is a statistic of other stored records, and no
set of them is safe to count: the search's filter holds records the asker may not see
whenever the policy withholds some that the filter admits (pushdown off, a denial
outside `visible_to`), and their words would change the scores, and so the order, of
what the asker is shown (docs/design.md §5, "Hybrid search"). A general word-frequency
table would be safe, but measured no better than none in the fused ranking
(bench/retrieval.py; docs/operations.md).

What IDF did that matters here is done by the record's structure instead: who holds a
claim and the day it applied (embed/indexed.py) are words every record of that person
or day shares, so they weigh `HEAD_WEIGHT` of what the claim's own words weigh: enough
to tell Caroline's turn from Melanie's with the same words, too little to outrank what
was said.

Texts about a person's life are short: a claim or a turn of a conversation is some 10
to 30 words, so lengths are normalised against 24 terms, not BM25's customary 256.
"""

from __future__ import annotations

from dataclasses import dataclass

import qdrant_edge as qe

K = 1.2
B = 0.75
AVG_LEN = 24.0
HEAD_WEIGHT = 0.5
# Recorded with the collection: a change to the terms or their weights is a new name.
NAME = f"bm25-english-k{K}-b{B}-avg{AVG_LEN:g}-head{HEAD_WEIGHT:g}-noidf"
# A query's distinct terms beyond this many are left out (a bound on the query's cost;
# a question seldom has more).
MAX_QUERY_TERMS = 64


@dataclass(frozen=True)
class Sparse:
    indices: list[int]
    values: list[float]


class LexicalEncoder:
    name = NAME

    def __init__(self) -> None:
        self._bm25 = qe.Bm25(qe.Bm25Config(k=K, b=B, avg_len=AVG_LEN, language="english"))

    def document(self, head: str, claim: str) -> Sparse:
        """The claim's BM25 weights, plus HEAD_WEIGHT times the head's (each part
        normalised by its own length)."""
        weights: dict[int, float] = {}
        for text, share in ((claim, 1.0), (head, HEAD_WEIGHT)):
            if not text:
                continue
            vector = self._bm25.embed_document(text)
            for index, value in zip(vector.indices, vector.values, strict=True):
                weights[index] = weights.get(index, 0.0) + share * value
        indices = sorted(weights)
        return Sparse(indices, [weights[i] for i in indices])

    def query(self, text: str) -> list[int]:
        """The query's distinct terms (their indices), at most MAX_QUERY_TERMS of them."""
        return sorted(set(self._bm25.embed_query(text).indices))[:MAX_QUERY_TERMS]


ENCODER = LexicalEncoder()
