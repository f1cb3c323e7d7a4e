"""The bench's leak count (sidecar/bench/corpus.py `Corpus.leaks`) can fail: an answer
holding a record the asker may not read, or an id the system under test made up, is
counted, for whose's answers and for the peer's alike (their parsers feed the same
count)."""

from __future__ import annotations

import httpx

from sidecar.bench import dialect, peer, sweep
from sidecar.bench.corpus import asker, build

WHO = asker("far", 0.05)


def test_the_true_nearest_readable_records_are_no_leak_and_full_recall() -> None:
    corpus = build(600, 3, seed=5)
    truth = [sorted(corpus.truth(WHO, q)[0]) for q in range(3)]
    assert corpus.quality(WHO, truth) == {"mean": 1.0, "min": 1.0, "leaks": 0}


def test_a_record_the_asker_may_not_read_is_counted_as_a_leak() -> None:
    corpus = build(600, 3, seed=5)
    readable = set(corpus.readable[WHO].tolist())
    forbidden = next(i for i in range(600) if i not in readable)
    answers = [sorted(corpus.truth(WHO, q)[0]) for q in range(3)]
    answers[1][-1] = forbidden
    measured = corpus.quality(WHO, answers)
    assert measured["leaks"] == 1
    assert measured["min"] < 1.0
    # An id that is no record of the corpus is a leak too, not a skipped entry.
    assert corpus.leaks(WHO, [*answers[0][:9], -1]) == 1


def test_both_answers_are_read_into_the_same_count() -> None:
    corpus = build(600, 3, seed=5)
    readable = corpus.readable[WHO].tolist()
    forbidden = next(i for i in range(600) if i not in set(readable))
    # The peer's answer (wardowl's POST /v1/retrieve): its ids are the corpus's numbers.
    theirs = {"hits": [{"id": str(readable[0])}, {"id": str(forbidden)}, {"id": "x"}]}
    assert corpus.leaks(WHO, peer.returned(theirs)) == 2
    # whose's answer (POST /v1/recall): record ids, mapped to the corpus's numbers.
    index = {"rec-a": readable[0], "rec-b": forbidden}
    body = {"items": [{"id": "rec-a"}, {"id": "rec-b"}, {"id": "never-written"}]}
    mine = httpx.Response(200, json=body)
    assert corpus.leaks(WHO, sweep._whose_returned(mine, index)) == 2
    # The Qdrant dialect's answer (through the sidecar or Qdrant directly): integer ids.
    points = {"result": {"points": [{"id": readable[0]}, {"id": forbidden}, {"id": "uuid"}]}}
    assert corpus.leaks(WHO, dialect.returned(points)) == 2
