"""How a disclosed record is worded: always whose claim it is, never a bare fact
unless the policy said it may be used as one.

The policy decides what a record may be used as (`usable_as`); its vocabulary
(policy data, `data.whose.vocabulary`, sent with every batch of decisions) says
how each use is worded and what it means for a verdict. A security team adds a
use in Rego and data alone: a use without wording is a malformed answer, and
nothing is disclosed (fail closed).

The sentence is what an LLM reads: it is served as the item's `content` and as
the Qdrant payload's `content` (the document text RAG libraries use), so the
writer's own wording, which may flatten a point of view into a fact, is kept
apart in `as_written`.
"""

from __future__ import annotations

import hashlib
import string
from collections.abc import Callable
from datetime import datetime
from typing import Any

import orjson
from cachetools import LRUCache
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sidecar.answers.derived import speaker_at
from sidecar.messages import Item
from sidecar.policy.contract import Decision
from sidecar.record import Stored, day, observed_path

# What a sentence template may name (see `_placeholders`).
PLACEHOLDERS = frozenset(
    {
        "claim",
        "Claim",
        "holder",
        "observed",
        "speaker",
        "hearer",
        "inner",
        "knower",
        "verb",
        "attitude",
        "groups",
        "whose",
        "source",
        "confidence",
    }
)


class MalformedVocabulary(ValueError):
    """The policy's vocabulary cannot word its own decisions."""


class Use(BaseModel):
    """How one `usable_as` is worded, and what it means for a verdict."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    sentence: str = Field(description="A template over the placeholders in wording.PLACEHOLDERS.")
    answers: bool = Field(
        default=False,
        description="A current one, unopposed, makes the verdict `answer` (the policy's facts).",
    )
    view_of_claim: bool = Field(
        default=True,
        description="A value for the proposition itself, compared in conflicts (a belief "
        "about someone else's mind is not).",
    )


class Vocabulary(BaseModel):
    """data.whose.vocabulary: the words for the policy's decisions."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    uses: dict[str, Use]
    verbs: dict[str, str] = Field(
        default_factory=dict, description="By modality: how a holder holds the claim."
    )
    attitudes: dict[str, str] = Field(
        default_factory=dict, description="By observed_attitude: what the observed holds."
    )
    source: str = Field(default="", description="Appended to every sentence.")

    @classmethod
    def parse(cls, raw: Any) -> Vocabulary:
        try:
            vocabulary = cls.model_validate(raw)
        except ValidationError as exc:
            raise MalformedVocabulary(f"vocabulary: {exc.errors()[0]['msg']}") from None
        for template in [vocabulary.source, *(use.sentence for use in vocabulary.uses.values())]:
            _template(template)
        return vocabulary

    def check(self, decisions: dict[str, Decision]) -> None:
        """Every allowed decision names a use this vocabulary can word."""
        for decision in decisions.values():
            if decision.allow and decision.usable_as not in self.uses:
                raise MalformedVocabulary(f"no wording for usable_as {decision.usable_as!r}")

    def answers(self, usable_as: str) -> bool:
        use = self.uses.get(usable_as)
        return use is not None and use.answers

    def view_of_claim(self, usable_as: str) -> bool:
        use = self.uses.get(usable_as)
        return use is not None and use.view_of_claim

    def sentence(self, record: dict[str, Any], usable_as: str) -> str:
        use = self.uses[usable_as]
        values = _Values(self, record)
        return use.sentence.format_map(values) + self.source.format_map(values)


class _Values(dict[str, str]):
    """A record's placeholder values, each worked out only when a template names it
    (a sentence names a few of them)."""

    def __init__(self, vocabulary: Vocabulary, record: dict[str, Any]) -> None:
        super().__init__()
        self.vocabulary = vocabulary
        self.record = record

    def __missing__(self, name: str) -> str:
        value = _VALUES[name](self)
        self[name] = value
        return value


def _holder(values: _Values) -> str:
    record = values.record
    source = record.get("source") or {}
    return str(record.get("observer_id") or source.get("speaker") or "an unnamed source")


def _minds(values: _Values, path: tuple[str, ...]) -> str:
    """The minds of a nested view, outermost first, each believing the next's view:
    "sally believes that anne" (the template then says what the innermost holds)."""
    return " believes that ".join(path)


def _speaker(values: _Values) -> str:
    """Who said it: for what was heard, the statement's speaker in the view's chain
    (its first mind when the holder heard it themselves)."""
    path = observed_path(values.record)
    if path:
        return path[speaker_at(values.record)]
    return str((values.record.get("source") or {}).get("speaker") or values["holder"])


def _hearer(values: _Values) -> str:
    """Who heard it, as the holder sees it: the holder ("bob"), or the holder's view of
    the mind that heard it ("alice believes that bob")."""
    path = observed_path(values.record)
    return " believes that ".join((values["holder"], *path[: speaker_at(values.record)]))


def _inner(values: _Values) -> str:
    """What a heard speaker said about further minds ("carol knows that "), or nothing."""
    rest = observed_path(values.record)[speaker_at(values.record) + 1 :]
    if not rest:
        return ""
    return f"{_minds(values, rest)} {values['attitude']} that "


def _claim_capitalised(values: _Values) -> str:
    claim = values["claim"]
    return claim[:1].upper() + claim[1:]


_VALUES: dict[str, Callable[[_Values], str]] = {
    "claim": lambda v: _claim(v.record),
    "Claim": _claim_capitalised,
    "holder": _holder,
    "observed": lambda v: _minds(v, observed_path(v.record)),
    "speaker": _speaker,
    "hearer": _hearer,
    "inner": _inner,
    "knower": lambda v: (observed_path(v.record) or (v["holder"],))[-1],
    "verb": lambda v: v.vocabulary.verbs.get(v.record.get("modality", ""), "believes"),
    "attitude": lambda v: v.vocabulary.attitudes.get(
        v.record.get("observed_attitude", ""), "believes"
    ),
    "groups": lambda v: ", ".join(
        a for a in v.record.get("audience", []) if a.startswith("group:")
    ),
    "whose": lambda v: _whose_claim(v.record),
    "source": lambda v: str(v.record.get("source_id")),
    "confidence": lambda v: f"{float(v.record.get('confidence', 1.0)):.2f}",
}
assert _VALUES.keys() == PLACEHOLDERS


def _template(text: str) -> str:
    try:
        named = {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}
    except ValueError as exc:
        raise MalformedVocabulary(f"sentence {text!r}: {exc}") from None
    unknown = named - PLACEHOLDERS
    if unknown:
        raise MalformedVocabulary(f"sentence {text!r} names unknown {sorted(unknown)}")
    return text


def _whose_claim(record: dict[str, Any]) -> str:
    """Who stands behind a claim with no verified source: its holder, the speaker
    whose words a relay recorded, else the writer that recorded it.

    A world-state claim may have no holder; then the wording must still say whose
    it is rather than pass it off as anonymous."""
    if observer := record.get("observer_id"):
        return f" (claimed by {observer})"
    if speaker := (record.get("source") or {}).get("speaker"):
        return f" (claimed by {speaker})"
    if writer := (record.get("provenance") or {}).get("writer"):
        return f" (recorded by {writer})"
    return ""


def _claim(record: dict[str, Any]) -> str:
    proposition = record.get("proposition") or {}
    text = proposition.get("text")
    if text and proposition.get("quoted"):
        # The speaker's own words: their "I" and their "yesterday" stay theirs, dated.
        source = record.get("source") or {}
        speaker = source.get("speaker") or record.get("observer_id") or "the speaker"
        said = day(record.get("valid_at"))
        return f"“{text}” (in {speaker}'s words" + (f", said on {said})" if said else ")")
    if text:
        return str(text)
    # Without a bare proposition the content is the claim; quote it, do not restate it.
    return f"“{record.get('content', '')}”"


def disclosed_item(
    record: Stored, decision: Decision, vocabulary: Vocabulary, at: datetime
) -> Item:
    """An allowed record as the agent receives it: attributed, with its obligations.

    `at` is the instant asked about: the status says whether the version still
    applied then. The rest of the item is a function of the record's payload, the
    decision's use, obligations and reasons, and the vocabulary alone: it is kept per
    vocabulary under exactly those (`_kept_by`), so a record shown again is not worded
    and validated again (docs/performance.md, round thirteen)."""
    payload = record.payload
    obligations, notes = sorted(decision.obligations), sorted(decision.reasons)
    key: _Worded | None = None
    try:
        raw = orjson.dumps(payload)
    except TypeError:  # not JSON (a payload made in process): worded each time
        raw = None
    # A large record is worded each time: what is kept is bounded by count, and an item
    # holds its payload's text about three times over.
    if raw is not None and len(raw) <= WORDED_PAYLOAD_BYTES:
        key = (_digest(raw), decision.usable_as, tuple(obligations), tuple(notes))
    kept = _kept_by(vocabulary)
    worded = kept.get(key) if key is not None else None
    if worded is None:
        sentence = vocabulary.sentence(payload, decision.usable_as)
        fields = {k: v for k, v in payload.items() if k in _ITEM_FIELDS}
        worded = Item.model_validate(
            fields
            | {
                "content": sentence,
                "as_written": payload.get("content"),
                "attribution": sentence,
                "usable_as": decision.usable_as,
                "obligations": obligations,
                "notes": notes,
                "status": "current",
            }
        )
        if key is not None:
            kept[key] = worded
    # Items are never changed in place (a change is a copy), so one may be shared.
    return worded.model_copy(update={"status": record.status_at(at), "score": record.score})


# What an item is kept under: the digest of the payload's JSON, the use, the
# obligations, the reasons.
_Worded = tuple[bytes, str, tuple[str, ...], tuple[str, ...]]
# The largest payload (its JSON) whose item is kept: 4 096 items of a vocabulary then
# hold at most about 100 MiB, and most records are far smaller.
WORDED_PAYLOAD_BYTES = 8192
# Items kept per vocabulary (least recently used forgotten first), and the vocabularies
# kept (one a policy revision: a rolling update hears two or three).
WORDED_KEPT = 4096
_VOCABULARIES_KEPT = 8
# By the vocabulary's id, with the vocabulary itself: held here, it stays alive, so its
# id names no other while it is kept (a model's own private attribute costs 3 µs a read).
_WORDED: LRUCache[int, tuple[Vocabulary, LRUCache[_Worded, Item]]] = LRUCache(
    maxsize=_VOCABULARIES_KEPT
)


def _digest(raw: bytes) -> bytes:
    """A key for JSON of any size: 32 bytes, collision-resistant (two payloads an
    attacker made to collide would share an item)."""
    return hashlib.blake2b(raw, digest_size=32).digest()


def _kept_by(vocabulary: Vocabulary) -> LRUCache[_Worded, Item]:
    """The items worded under `vocabulary`."""
    held = _WORDED.get(id(vocabulary))
    if held is None or held[0] is not vocabulary:
        held = _WORDED[id(vocabulary)] = (vocabulary, LRUCache(maxsize=WORDED_KEPT))
    return held[1]


_ITEM_FIELDS = set(Item.model_fields) - {
    "content",
    "as_written",
    "attribution",
    "usable_as",
    "obligations",
    "notes",
    "status",
    "score",
}
