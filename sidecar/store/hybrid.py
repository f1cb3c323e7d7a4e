"""Hybrid search: the dense and the lexical ranking, fused in one Qdrant query.

One query per search round, on either backend (Qdrant's query API):

    prefetch  D = dense nearest, filter F, limit n     S = lexical BM25, filter F, limit n
    rescore   every point of D and S by its dense score, and by its BM25 score
    fuse      score = dense + W * bm25 / (bm25 + C)         (a Qdrant formula)
    return    the n best, filter F

F is the search's whole scope (tenant, the caller's filters, current versions, and the
policy's pushdown filter), on every branch: a record nobody in the audience may see is
in no branch (docs/design.md §5).

Each of a point's two scores is a function of the point and the query alone: the cosine
of its dense vector, and the sum of its BM25 term weights for the query's terms, with
no inverse document frequency (embed/lexical.py). So is the fusion of the two. Nothing
else stored enters a score, and so a record the asker may not see changes no score and
no order the asker is shown even when F admits it, as it does when the policy withholds
records the pushdown filter does not name (a denial outside `visible_to`, or
WHOSE_PUSHDOWN=false). The same query goes to both backends, which store the same
vectors with no modifier: they score alike.

Why a formula and not reciprocal rank fusion: the reader (reads/reader.py) over-fetches
in rounds that exclude what it has seen, sorts equal scores by id, and asks for more
when a cut falls inside a tie. That needs a score that belongs to the point: the same in
every round and for every page, equal exactly when the two signals are. The formula of
a point's own dense and BM25 scores (each rescored over the union, so neither is a
default for a point only one branch found) is that; a rank-based fusion changes a
point's score with what else a round returns, and ranks points that tie in one branch
in whatever order the engine met them (and measured worse: bench/retrieval.py). W and C
were chosen on that benchmark (docs/operations.md).
"""

from __future__ import annotations

import qdrant_edge as qe
from qdrant_client.http import models as qm

from sidecar.store.vectors import DENSE, LEXICAL

# fused = dense + weight * bm25 / (bm25 + SATURATION): the BM25 share rises from 0
# towards the weight, half of it at a BM25 score of SATURATION. The weight depends on
# how much the dense side knows (Search.lexical_weight, WHOSE_LEXICAL_WEIGHT): the
# hashing embedder's vectors are themselves made of words, a real model's are not.
SATURATION = 4.0
WEIGHT_WITH_HASHING = 4.0
WEIGHT_WITH_A_MODEL = 1.0


# --- the embedded engine ---------------------------------------------------------------


def edge_lexical(terms: list[int]) -> qe.SparseVector:
    """The query's terms, each of weight 1."""
    return qe.SparseVector(terms, [1.0] * len(terms))


def edge_fused(
    vector: list[float],
    terms: list[int],
    flt: qe.Filter,
    limit: int,
    dense_params: qe.SearchParams | None,
    weight: float,
) -> tuple[list[qe.Prefetch], qe.Formula]:
    sparse = edge_lexical(terms)
    branches = [
        qe.Prefetch(limit, qe.Query.Nearest(vector), filter=flt, params=dense_params),
        qe.Prefetch(limit, qe.Query.Nearest(sparse, using=LEXICAL), filter=flt),
    ]
    union = 2 * limit
    rescored = [
        qe.Prefetch(union, qe.Query.Nearest(vector), prefetches=branches),
        qe.Prefetch(union, qe.Query.Nearest(sparse, using=LEXICAL), prefetches=branches),
    ]
    return rescored, _edge_formula(weight)


def _edge_formula(weight: float) -> qe.Formula:
    e = qe.Expression
    bm25 = e.Variable("$score[1]")
    share = e.Div(bm25, e.Sum([bm25, e.Constant(SATURATION)]), 0.0)
    fused = e.Sum([e.Variable("$score[0]"), e.Mult([e.Constant(weight), share])])
    return qe.Formula(fused, defaults={"$score[0]": 0.0, "$score[1]": 0.0})


# --- Qdrant server ---------------------------------------------------------------------


def server_lexical(terms: list[int]) -> qm.SparseVector:
    """The query's terms, each of weight 1 (the engine's query, in the client's types)."""
    return qm.SparseVector(indices=terms, values=[1.0] * len(terms))


def server_fused(
    vector: list[float],
    terms: list[int],
    flt: qm.Filter,
    limit: int,
    dense_params: qm.SearchParams | None,
    weight: float,
) -> tuple[list[qm.Prefetch], qm.FormulaQuery]:
    sparse = server_lexical(terms)
    branches = [
        qm.Prefetch(
            query=vector, using=DENSE or None, filter=flt, limit=limit, params=dense_params
        ),
        qm.Prefetch(query=sparse, using=LEXICAL, filter=flt, limit=limit),
    ]
    union = 2 * limit
    rescored = [
        qm.Prefetch(prefetch=branches, query=vector, limit=union),
        qm.Prefetch(prefetch=branches, query=sparse, using=LEXICAL, limit=union),
    ]
    return rescored, _server_formula(weight)


def _server_formula(weight: float) -> qm.FormulaQuery:
    bm25 = "$score[1]"
    share = qm.DivExpression(
        div=qm.DivParams(
            left=bm25, right=qm.SumExpression(sum=[bm25, SATURATION]), by_zero_default=0.0
        )
    )
    fused = qm.SumExpression(sum=["$score[0]", qm.MultExpression(mult=[weight, share])])
    return qm.FormulaQuery(formula=fused, defaults={"$score[0]": 0.0, "$score[1]": 0.0})
