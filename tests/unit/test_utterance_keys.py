"""The key of an unkeyed claim (writes/observations.py `utterance_key`): its line is the
utterance's own, so only a repost of the same turn by the same speaker shares it."""

from __future__ import annotations

from sidecar.messages import Observation
from sidecar.writes.observations import utterance_key


def turn(
    speaker: str, utterance_id: str | None = "u-7", text: str = "the door is open"
) -> Observation:
    return Observation.model_validate(
        {
            "speaker": speaker,
            "source_id": "kitchen",
            "utterance_id": utterance_id,
            "said_at": "2026-03-01T10:00:00Z",
            "claims": [
                {"proposition": {"text": text}},
                {"proposition": {"text": "so is the gate"}},
            ],
        }
    )


def test_a_repost_of_a_turn_has_its_key() -> None:
    assert utterance_key(turn("alice"), 0) == utterance_key(turn("alice"), 0)
    assert utterance_key(turn("alice", None), 0) == utterance_key(turn("alice", None), 0)


def test_another_speaker_reusing_the_utterance_id_names_another_line() -> None:
    # A belief a hearer adopted from alice's turn must not be superseded by bob's.
    assert utterance_key(turn("alice"), 0) != utterance_key(turn("bob"), 0)
    assert utterance_key(turn("alice", None), 0) != utterance_key(turn("bob", None), 0)


def test_each_claim_of_a_turn_and_each_turn_is_its_own_line() -> None:
    assert utterance_key(turn("alice"), 0) != utterance_key(turn("alice"), 1)
    assert utterance_key(turn("alice"), 0) != utterance_key(turn("alice", "u-8"), 0)
