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

The bodies (Observation, Claim) are in messages.py, with every other request body.
"""

from __future__ import annotations

import uuid

from sidecar.messages import Claim, Observation
from sidecar.record import MemoryWrite, day

# A hedged claim ("I think ...") is weaker evidence of the speaker's view.
DEFAULT_CONFIDENCE = {False: 0.9, True: 0.6}


def to_records(observation: Observation) -> list[MemoryWrite]:
    """One record per claim, held by the speaker, visible to who was present."""
    speaker = observation.speaker
    audience = observation.present
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


# Keys of unkeyed claims: `said.` and a name-based UUID of the utterance and the claim's
# place in it (docs/design.md §4, "a claim without a key").
UTTERANCE_KEYS = "said."
_UTTERANCES = uuid.UUID("5c1d8e0a-6f43-4a8e-b2d7-0e9a4c3f7b12")


def keyed(observation: Observation) -> Observation:
    """The observation with each unkeyed claim keyed by its utterance (`utterance_key`),
    so its statement, what each hearer heard, their views of each other's minds and
    any belief the trust policy adopts from it are lines like a keyed claim's."""
    if all(claim.proposition.key for claim in observation.claims):
        return observation
    claims = [
        claim
        if claim.proposition.key
        else claim.model_copy(
            update={
                "proposition": claim.proposition.model_copy(
                    update={"key": utterance_key(observation, index)}
                )
            }
        )
        for index, claim in enumerate(observation.claims)
    ]
    return observation.model_copy(update={"claims": claims})


def utterance_key(observation: Observation, index: int) -> str:
    """The key of an unkeyed claim: the utterance itself, never a guessed topic.

    Without a key nobody can say what a turn is about, so nothing may supersede it
    or conflict with it but the very same claim of the very same utterance (a
    repost of it). So its line is named by the conversation, who said it, the
    utterance (its id, else when it was said and the words) and the claim's place in
    the turn: another speaker reusing an utterance id names another line (a belief a
    hearer adopted from one teller is never replaced by another's turn of that id).
    Every part is the observation's own: the key says nothing about other records."""
    claim = observation.claims[index]
    utterance = (
        ["id", observation.speaker, observation.utterance_id]
        if observation.utterance_id is not None
        else [
            "at",
            observation.speaker,
            observation.said_at.isoformat() if observation.said_at else "",
            claim.proposition.text,
        ]
    )
    label = "\x00".join([observation.source_id, *utterance, str(index)])
    return UTTERANCE_KEYS + str(uuid.uuid5(_UTTERANCES, label))


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
