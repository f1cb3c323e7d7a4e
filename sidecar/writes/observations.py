"""Speaker-grounded ingestion: what someone said becomes *their* view, nothing more.

A memory extractor posts an utterance's claims with who said them and who was
there. Each claim becomes a statement held by the speaker (`act: said`: a speech act,
which stands for the speaker's view until they learn more, and may be a lie); a claim
about another participant's mind (`about`, one person or a chain of them) becomes the
speaker's statement about that mind (B_speaker(K_bob p)), never Bob's knowledge; the
audience is who was present. What each hearer heard, and their model of the speaker's
belief, are derived from the statement at read time (answers/derived.py); whether a
hearer takes the claim as their own belief is the trust policy's call
(writes/testimony.py). The records then take the ordinary write path (write policy,
supersession).

A claim keeps its meaning when it is served to someone else. A proposition is worded
into "caroline said that ...", so an "I", a "you" or a "yesterday" in it would read as
the reader's, or as undated: such a claim is refused (`unresolved_reference`) unless
the extractor resolves it ("caroline went to a support group on 7 May 2023") or sends
the speaker's words as a quote (`quoted: true`), which is served as one, dated:
"caroline said that “I went to a support group yesterday” (in caroline's words, said on
8 May 2023)".
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from sidecar.record import (
    MAX_PATH,
    Attitude,
    Instant,
    MemoryWrite,
    Name,
    Proposition,
    Vector,
    day,
)

# A hedged claim ("I think ...") is weaker evidence of the speaker's view.
DEFAULT_CONFIDENCE = {False: 0.9, True: 0.6}


GROUP_NOT_PRESENT = "group_is_not_a_person_present"
GROUP_NOT_A_MIND = "group_is_not_a_mind"


def _a_person(name: str) -> str:
    # docs/design.md §6: audience ⊆ who was present. A group is not someone in the room:
    # its members come from the directory and from tokens, today and tomorrow.
    if name.startswith("group:"):
        raise PydanticCustomError(
            GROUP_NOT_PRESENT, "a group is not a person present: name who was there"
        )
    return name


# Someone who was there: the speaker or a participant (they become the audience).
Present = Annotated[Name, AfterValidator(_a_person)]


def _a_mind(name: str) -> str:
    # "alice says that group:launch-team knows p" would hand a belief to whoever joins
    # the group: a claim about a mind is about a person.
    if name.startswith("group:"):
        raise PydanticCustomError(GROUP_NOT_A_MIND, "a group is not a mind: name a person")
    return name


# Someone whose mind a claim is about.
Mind = Annotated[Name, AfterValidator(_a_mind)]
MindPath = Annotated[list[Mind], Field(min_length=1, max_length=MAX_PATH)]

UNRESOLVED = "unresolved_reference"
# Words whose meaning depends on who speaks, to whom, or when.
_PERSON = re.compile(
    r"\b(i|me|my|mine|myself|we|us|our|ours|ourselves|you|your|yours|yourself|yourselves)\b"
    r"|\b(i'm|i've|i'd|i'll|we're|we've|you're|you've)\b",
    re.IGNORECASE,
)
_TIME = re.compile(
    r"\b(yesterday|today|tonight|tomorrow|ago)\b"
    r"|\b(last|next|this)\s+(week|weekend|month|year|night|morning|afternoon|evening"
    r"|monday|tuesday|wednesday|thursday|friday|saturday|sunday"
    r"|spring|summer|autumn|fall|winter)\b",
    re.IGNORECASE,
)


def unresolved(text: str) -> list[str]:
    """The words of `text` that only its speaker and its moment give a meaning."""
    return [m.group(0) for pattern in (_PERSON, _TIME) for m in pattern.finditer(text)]


class Claim(BaseModel):
    model_config = ConfigDict(extra="forbid")

    proposition: Proposition
    about: Mind | MindPath | None = Field(
        default=None,
        description="Whose mind the claim is about: a person, or a chain of them "
        "(`[bob, carol]`: bob thinks carol …), never a group.",
    )
    attitude: Attitude | None = Field(
        default=None, description="With `about`: what the innermost mind does, knows or believes."
    )
    hedged: bool = Field(default=False, description="Said with hedging, e.g. 'I think'.")
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    quoted: bool = Field(
        default=False,
        description="The proposition's text is the speaker's own words, as said (first "
        "person, relative times): stored and served as a quote, dated `said_at`.",
    )
    vector: Vector | None = Field(
        default=None, description="Your own embedding of the claim (the collection's model)."
    )

    @model_validator(mode="after")
    def _resolved(self) -> Claim:
        if not self.quoted and (words := unresolved(self.proposition.text)):
            raise PydanticCustomError(
                UNRESOLVED,
                "{words}: whose, or when? Resolve them (name the person, give the date) "
                "or send the speaker's words as said, with quoted: true",
                {"words": ", ".join(dict.fromkeys(w.lower() for w in words))},
            )
        return self

    def path(self, speaker: str) -> list[str]:
        """The minds after the speaker the claim is about (none: the speaker's own)."""
        about = [self.about] if isinstance(self.about, str) else list(self.about or [])
        return [] if about in ([], [speaker]) else about


class Observation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    speaker: Present
    source_id: Name
    channel: Name | None = None
    participants: list[Present] = Field(default_factory=list, max_length=1000)
    said_at: Instant | None = None
    access_scope: Name | None = None
    claims: list[Claim] = Field(min_length=1, max_length=100)


def to_records(observation: Observation) -> list[MemoryWrite]:
    """One record per claim, held by the speaker, visible to who was present."""
    speaker = observation.speaker
    audience = list(dict.fromkeys([speaker, *observation.participants]))
    source = {
        "kind": "conversation",
        "speaker": speaker,
        "channel": observation.channel,
        "participants": audience,
    }
    records = []
    for claim in observation.claims:
        about = claim.path(speaker)
        attitude = (claim.attitude or "believes") if about else None
        proposition = claim.proposition
        if claim.quoted:
            proposition = proposition.model_copy(update={"quoted": True})
        records.append(
            MemoryWrite(
                content=_sentence(speaker, claim, about, attitude, observation.said_at),
                proposition=proposition,
                observer_id=speaker,
                observed_path=about or None,
                observed_attitude=attitude,
                act="said",
                source_id=observation.source_id,
                source=source,
                modality="reported_belief" if claim.hedged else "asserted",
                confidence=claim.confidence
                if claim.confidence is not None
                else DEFAULT_CONFIDENCE[claim.hedged],
                audience=audience,
                access_scope=observation.access_scope,
                valid_at=observation.said_at,
                vector=claim.vector,
            )
        )
    return records


def _sentence(
    speaker: str, claim: Claim, about: list[str], attitude: str | None, said_at: object
) -> str:
    verb = "thinks" if claim.hedged else "says"
    text = claim.proposition.text
    if claim.quoted:
        when = f" on {day(said_at)}" if said_at is not None else ""
        return f"{speaker} said{when}: “{text}”"
    if about:
        minds = " believes that ".join(about)
        return f"{speaker} {verb} that {minds} {attitude} that {text}"
    return f"{speaker} {verb} that {text}"
