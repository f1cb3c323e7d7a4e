from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from sidecar.answers.wording import PLACEHOLDERS, Vocabulary, _kept_by, disclosed_item
from sidecar.messages import Item
from sidecar.policy.contract import Decision
from sidecar.record import Stored
from tests.unit.vocabulary import VOCABULARY

P = {"text": "the launch is October 17", "key": "launch.date", "value": "2026-10-17"}


def rec(**fields: Any) -> dict[str, Any]:
    base = {
        "proposition": P,
        "observer_id": "alice",
        "modality": "reported_belief",
        "source_id": "private-session-42",
        "confidence": 0.78,
        "content": "Alice believes the launch is October 17",
    }
    return base | fields


def attribution(record: dict[str, Any], usable_as: str) -> str:
    return VOCABULARY.sentence(record, usable_as)


@pytest.mark.parametrize(
    ("record", "usable_as", "sentence"),
    [
        (rec(), "belief", "alice believes that the launch is October 17"),
        (rec(modality="asserted"), "belief", "alice says that the launch is October 17"),
        (
            rec(observed_id="bob", observed_attitude="knows"),
            "nested_belief",
            "alice believes that bob knows that the launch is October 17",
        ),
        (rec(modality="known", observed_id="bob"), "knowledge", "bob knows that the launch"),
        (rec(modality="world_state", observer_id=None), "fact", "The launch is October 17"),
        (
            rec(modality="world_state"),
            "unverified_claim",
            "Unverified (claimed by alice): the launch is October 17",
        ),
        (
            rec(modality="world_state", observer_id=None, provenance={"writer": "alice"}),
            "unverified_claim",
            "Unverified (recorded by alice): the launch is October 17",
        ),
        (
            rec(modality="world_state", observer_id=None),
            "unverified_claim",
            "Unverified: the launch is October 17",
        ),
        (
            rec(modality="common_knowledge", audience=["group:launch-team", "dave"]),
            "common_knowledge",
            "It is common knowledge in group:launch-team that the launch",
        ),
    ],
)
def test_wording_follows_usable_as(record: dict[str, Any], usable_as: str, sentence: str) -> None:
    assert attribution(record, usable_as).startswith(sentence)


def test_every_sentence_cites_source_and_confidence() -> None:
    assert attribution(rec(), "belief").endswith("— source private-session-42, confidence 0.78")


def test_without_a_proposition_the_content_is_quoted_not_restated() -> None:
    text = attribution(rec(proposition=None), "belief")
    assert text.startswith("alice believes that “Alice believes the launch is October 17”")


def test_a_template_may_name_every_placeholder_each_worked_out_from_the_record() -> None:
    # A use's sentence names a few placeholders and the values are worked out only for
    # those: one naming them all (twice, one after the other) gets every value right.
    names = sorted(PLACEHOLDERS)
    template = " ".join(f"{name}=[{{{name}}}]" for name in names)
    vocabulary = Vocabulary.parse(
        {"uses": {"all": {"sentence": template + " " + template}}, "verbs": {"asserted": "says"}}
    )
    record = rec(
        modality="asserted",
        observed_id="bob",
        observed_attitude="doubts",
        audience=["group:launch-team", "dave", "group:board"],
        source={"kind": "conversation", "speaker": "erin"},
    )
    expected = {
        "claim": "the launch is October 17",
        "Claim": "The launch is October 17",
        "holder": "alice",
        "observed": "bob",
        "speaker": "bob",
        "hearer": "alice",
        "inner": "",
        "knower": "bob",
        "verb": "says",
        "attitude": "believes",
        "groups": "group:launch-team, group:board",
        "whose": " (claimed by alice)",
        "source": "private-session-42",
        "confidence": "0.78",
    }
    once = " ".join(f"{name}=[{expected[name]}]" for name in names)
    assert vocabulary.sentence(record, "all") == once + " " + once
    # Without an observed mind or a holder, the ones that fall back do.
    bare = rec(observer_id=None, source={"kind": "conversation", "speaker": "erin"})
    worded = vocabulary.sentence(bare, "all")
    assert "holder=[erin]" in worded
    assert "knower=[erin]" in worded
    assert "whose=[ (claimed by erin)]" in worded
    assert "speaker=[erin]" in worded


def test_a_nested_view_is_worded_mind_by_mind() -> None:
    nested = rec(
        modality="observed",
        observer_id="anne",
        observed_id="sally",
        observed_path=["sally", "anne"],
        observed_attitude="believes",
    )
    assert attribution(nested, "nested_belief").startswith(
        "anne saw that sally believes that anne believes that the launch is October 17"
    )
    heard = rec(
        observer_id="bob",
        observed_id="alice",
        observed_path=["alice", "carol"],
        observed_attitude="knows",
        act="heard",
    )
    assert attribution(heard, "heard").startswith(
        "bob heard alice say that carol knows that the launch is October 17"
    )
    said = rec(act="said", modality="asserted")
    assert attribution(said, "statement").startswith("alice said that the launch is October 17")


def test_what_someone_heard_names_the_hearer_the_speaker_and_the_inner_minds() -> None:
    """A view of what was heard: the holder, or the holder's view of whoever heard it,
    heard the statement's speaker (found in the chain by `source.speaker`) say it."""
    vocabulary = Vocabulary.parse(
        {
            "uses": {"heard": {"sentence": "{hearer} heard {speaker} say that {inner}{claim}"}},
            "attitudes": {"knows": "knows"},
        }
    )
    source = {"kind": "conversation", "speaker": "erin"}

    def worded(path: list[str]) -> str:
        record = rec(observed_id=path[0], act="heard", source=source, observed_attitude="knows")
        if len(path) > 1:
            record["observed_path"] = path
        return vocabulary.sentence(record, "heard")

    claim = "the launch is October 17"
    assert worded(["erin"]) == f"alice heard erin say that {claim}"
    assert worded(["bob", "erin"]) == f"alice believes that bob heard erin say that {claim}"
    assert worded(["erin", "carol"]) == f"alice heard erin say that carol knows that {claim}"
    assert worded(["bob", "dave", "erin", "carol"]) == (
        f"alice believes that bob believes that dave heard erin say that carol knows that {claim}"
    )


STORED = {
    "id": "5d34f37d-5222-434a-bdea-be11a6c6a56c",
    "tenant": "acme",
    "content": "Alice believes the launch is October 17",
    "proposition": P,
    "observer_id": "alice",
    "source_id": "s-1",
    "source": {"kind": "conversation", "speaker": "alice", "participants": []},
    "modality": "reported_belief",
    "evidence": [],
    "confidence": 0.78,
    "audience": ["alice", "bob"],
    "valid_at": "2026-10-01T00:00:00Z",
    "invalid_at": "2026-11-01T00:00:00Z",
    "recorded_at": "2026-10-01T00:00:00Z",
    "provenance": {"writer": "alice", "derived_from": []},
}
BEFORE, AFTER = datetime(2026, 10, 15, tzinfo=UTC), datetime(2026, 11, 15, tzinfo=UTC)


def stored(score: float | None = None, **fields: Any) -> Stored:
    found = Stored.from_payload(STORED | fields, score)
    assert found is not None
    return found


def afresh(record: Stored, decision: Decision, at: datetime) -> Item:
    """The item as a vocabulary that has worded nothing yet words it."""
    return disclosed_item(record, decision, Vocabulary.parse(VOCABULARY.model_dump()), at)


def test_an_item_shown_again_is_worded_as_afresh_for_its_instant_score_and_decision() -> None:
    # The vocabulary keeps what it worded (answers/wording.py): what changes between two
    # showings of one record (the instant, the score, the decision) is still theirs.
    belief = Decision(allow=True, usable_as="belief", obligations=["attribute"])
    other = Decision(allow=True, usable_as="fact", obligations=["cite"], reasons=["why"])
    # The same obligations, another use.
    plain = Decision(allow=True, usable_as="fact", obligations=["attribute"])
    vocabulary = Vocabulary.parse(VOCABULARY.model_dump())
    shown = []
    for _ in range(2):
        for record, decision, at in (
            (stored(0.9), belief, BEFORE),
            (stored(0.4), belief, AFTER),
            (stored(None), other, BEFORE),
            (stored(0.9, confidence=0.5), belief, BEFORE),
            (stored(0.9), plain, BEFORE),
        ):
            item = disclosed_item(record, decision, vocabulary, at)
            assert item == afresh(record, decision, at)
            shown.append(item)
    first = shown[:5]
    statuses = [i.status for i in first]
    assert statuses == ["current", "superseded", "current", "current", "current"]
    assert [i.score for i in first] == [0.9, 0.4, None, 0.9, 0.9]
    assert first[4].usable_as == "fact"
    assert first[4].content != first[0].content
    assert first[2].usable_as == "fact"
    assert first[2].notes == ["why"]
    assert first[0].content != first[3].content  # the confidence is in the sentence
    # Another vocabulary words the same record its own way.
    louder = Vocabulary.parse(VOCABULARY.model_dump() | {"source": " (source {source}, LOUD)"})
    assert disclosed_item(stored(0.9), belief, louder, BEFORE).content.endswith("LOUD)")


def test_a_large_record_is_worded_each_time_not_kept() -> None:
    # What a vocabulary keeps is bounded by count: a record of many kilobytes (a
    # document) would hold its text in memory about three times over.
    vocabulary = Vocabulary.parse(VOCABULARY.model_dump())
    belief = Decision(allow=True, usable_as="belief", obligations=["attribute"])
    small, large = stored(0.5), stored(0.5, content="x" * 20_000)
    for record in (small, large):
        assert disclosed_item(record, belief, vocabulary, BEFORE) == afresh(record, belief, BEFORE)
    assert len(_kept_by(vocabulary)) == 1
