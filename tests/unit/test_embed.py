from __future__ import annotations

import hashlib
import math
import struct

import pytest

from sidecar.embed.hashing import HashingEmbedder


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


@pytest.mark.parametrize(
    ("text", "sha256"),
    [
        (
            "The launch is October 17",
            "182a76461a32c86d141b0c63cfbb1c6f30cea27e45a3e456f2a386291b007706",
        ),
        ("when is the launch?", "ffd02c803c366a104eefecbc85e5baccf95d8af4ccadf57a2b9c05761c7d62da"),
        ("", "fda4fa662d2e1273ff8cb18f3feca8da7ce9740d351fc7b97d06fdd7f5be45ba"),
        (
            "🚀 émoji and ünïcode",
            "fd72acfae9eb8f9856398135e4d9abb59b895c83f73d291ae80ab1648a318bbb",
        ),
        (
            "the launch budget was approved by the board on Friday and the platform team moved"
            " the roadmap migration to next sprint while legal reviews the vendor security risk"
            " status and pricing scope for Q3 support design owner",
            "7dd815aa1a4c406411ce3e3704a33bc1f22d2acbc76df7782e57ad28cd64be0f",
        ),
    ],
)
def test_vectors_are_bit_for_bit_those_earlier_versions_stored(text: str, sha256: str) -> None:
    # Stored records keep the vectors they were written with: a query embedded any
    # differently (a faster hashing path, say) would drift from them. Digests taken
    # from the embedder before it memoised its feature hashes.
    embed = HashingEmbedder(384).embed
    for _ in range(2):  # the second time from whatever the first one memoised
        packed = struct.pack("<384d", *embed(text))
        assert hashlib.sha256(packed).hexdigest() == sha256
