from __future__ import annotations

import math

from sidecar.embed import HashingEmbedder


def _cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_same_text_same_vector_across_instances() -> None:
    assert HashingEmbedder(64).embed("The launch is October 17") == HashingEmbedder(64).embed(
        "The launch is October 17"
    )


def test_vectors_have_the_configured_dimension_and_unit_length() -> None:
    for text in ("launch", "", "🚀 émoji and ünïcode"):
        vector = HashingEmbedder(384).embed(text)
        assert len(vector) == 384
        assert math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, rel_tol=1e-9)


def test_shared_words_score_higher_than_unrelated_text() -> None:
    embed = HashingEmbedder(384).embed
    query = embed("when is the launch?")
    related = embed("the launch is October 17")
    unrelated = embed("the cafeteria serves soup on Tuesdays")
    assert _cos(query, related) > _cos(query, unrelated) + 0.1
