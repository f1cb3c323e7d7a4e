"""Random worlds for the leak oracle: a tenant's directory, its records, and who asks.

Each world gets tenants of its own (and a neighbouring tenant with the same
principal names), so worlds sharing one sidecar never see each other. Records are
written through the real write API by a relay (an extractor with the authority
role), so the write policy decides what is stored; a refused write is simply not
part of the world. Some records come with summaries of them (derived records, which
the relay may write only when it may read the premise: those records name the relay
in their audience), and each world runs under policy data of its own: what erasing a
premise does to its derivations (`config.erasure.on_derived`) and which changes of a
premise withhold them (`config.stale.withhold`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from typing import Any, get_args

from hypothesis import strategies as st

from sidecar.record import Modality
from tests.oracle.reference import Record, TenantDirectory

PRINCIPALS = ["p0", "p1", "p2", "p3"]  # in the tenant directory
OUTSIDER = "p4"  # unknown to the directory: only named entries and token groups admit them
PEOPLE = [*PRINCIPALS, OUTSIDER]
GROUPS = ["g1", "g2"]  # in the directory
TOKEN_ONLY_GROUP = "g3"  # exists only in askers' token claims
SCOPES = ["s1", "s2"]
RELAY = "relay"  # writes every record; cleared for every scope
RELAY_ROLES = "extractor,authority"
# Record categories a subject's grant may name (the shipped vocabulary holds both).
CATEGORIES = ["appointments", "clinical"]
# Boundaries matter: as_of is drawn from the same instants as valid_at.
TIMES = [
    "2026-01-01T00:00:00Z",
    "2026-02-01T00:00:00Z",
    "2026-03-01T00:00:00Z",
    "2100-01-01T00:00:00Z",  # not yet valid now
]
KEYS = ["k0", "k1"]
# Every modality the record model accepts, so a new one is generated as soon as it exists.
MODALITIES = list(get_args(Modality))
SOURCE_KINDS = ["conversation", "document", "change_record", "announcement", "perception"]
CHANNELS = [None, "all-hands", "dm"]
# rego/whose/config/data.json: what an erasure does to derivations, and what a premise
# change may be (config.stale.withhold names some).
ON_DERIVED = ["flag", "withdraw", "erase"]
PREMISE_CHANGES = ["superseded", "erased", "withdrawn", "stale"]


@dataclass
class Write:
    """One request of the world's history: a record, or an observation (one claim)."""

    via: str  # "memories", "observations" or "witnessed"
    body: dict[str, Any]
    marker: str
    # Summaries of this write's (first) record, written right after it: each derives
    # from the record (premise 0) or from the summary before it (premise k: the k-th),
    # within its premise's audience and scope (test_leak_oracle `build`).
    summaries: list[Write] = field(default_factory=list)
    premise: int = 0


@dataclass
class Query:
    asker: str
    token_groups: list[str]
    audience: list[str]
    as_of: str | None
    include_history: bool
    # A chain of minds asked about (recall's `observed`), by its observer (None: anyone).
    chain: tuple[str, ...] = ("p0",)
    chain_observer: str | None = None


@dataclass(frozen=True)
class GrantSpec:
    """A subject's grant, given after the world is written (so it reaches records
    already stored); `revoked`: taken back before the first question."""

    subject: str
    reader: str
    categories: tuple[str, ...]
    revoked: bool = False


@dataclass
class World:
    directory: TenantDirectory
    writes: list[Write]
    queries: list[Query]
    tenant: str = field(default_factory=lambda: f"w{uuid.uuid4().hex[:12]}")
    on_derived: str = "flag"
    withhold: tuple[str, ...] = ()
    grants: list[GrantSpec] = field(default_factory=list)

    def config(self) -> dict[str, Any]:
        """The world's policy data, as data.whose.config paths and values."""
        return {"erasure/on_derived": self.on_derived, "stale/withhold": list(self.withhold)}

    @property
    def neighbour(self) -> str:
        return f"{self.tenant}-n"


def _marker() -> str:
    # A unique, unguessable string per record: if it shows up in a response body
    # that may not disclose the record, the record leaked.
    return f"SECRET{uuid.uuid4().hex}"


@st.composite
def directories(draw: st.DrawFn) -> TenantDirectory:
    scopes = {p: set(draw(st.lists(st.sampled_from(SCOPES), unique=True))) for p in PRINCIPALS}
    scopes[RELAY] = set(SCOPES)
    groups = {
        g: set(draw(st.lists(st.sampled_from(PRINCIPALS), unique=True, max_size=3))) for g in GROUPS
    }
    return TenantDirectory(scopes=scopes, groups=groups)


audiences = st.lists(
    st.sampled_from([*PEOPLE, *(f"group:{g}" for g in [*GROUPS, TOKEN_ONLY_GROUP])]),
    unique=True,
    min_size=1,
    max_size=4,
)
evidence_items = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(
            ["acknowledgement", "change_record", "announcement", "document", "witnessed"]
        ),
        "ref": st.sampled_from(["ref-1", "ref-2"]),
        "by": st.sampled_from(PEOPLE),
    },
    # Dated evidence counts from its date on, at write (valid_at) and at read (as_of).
    optional={"at": st.sampled_from(TIMES)},
)


@st.composite
def record_writes(draw: st.DrawFn) -> Write:
    marker = _marker()
    modality = draw(st.sampled_from(MODALITIES))
    # Only a world-state claim may have no holder.
    holders = (
        st.none() | st.sampled_from(PEOPLE)
        if modality == "world_state"
        else st.sampled_from(PEOPLE)
    )
    observer = draw(holders)
    observed = draw(st.none() | st.sampled_from(PEOPLE))
    if observed == observer:
        observed = None
    key = draw(st.none() | st.sampled_from(KEYS))
    proposition: dict[str, Any] = {"text": f"the claim {marker}"}
    if key is not None:
        proposition |= {"key": key, "value": draw(st.integers(0, 2))}
    kind = draw(st.sampled_from(SOURCE_KINDS))
    source: dict[str, Any] = {"kind": kind}
    if observer is not None:
        source["speaker"] = observer
    if (channel := draw(st.sampled_from(CHANNELS))) is not None:
        source["channel"] = channel
    valid = draw(st.sampled_from(range(len(TIMES))))
    body: dict[str, Any] = {
        "content": f"{observer or 'the system'} holds {marker}",
        "proposition": proposition,
        "source_id": f"src-{draw(st.integers(0, 2))}",
        "source": source,
        "modality": modality,
        "evidence": draw(st.lists(evidence_items, max_size=2)),
        "confidence": draw(st.sampled_from([0.3, 0.9])),
        "audience": draw(audiences),
        "valid_at": TIMES[valid],
    }
    # Lean towards what the write policy accepts for the strong modalities, so every
    # world is likely to hold facts, knowledge and common knowledge, not just beliefs.
    if modality == "world_state" and draw(st.booleans()):
        source["kind"] = "change_record"
    if modality == "known" and draw(st.booleans()):
        knower = observed or observer
        body["evidence"].insert(0, {"kind": "acknowledgement", "ref": "ack-1", "by": knower})
    if modality == "common_knowledge" and draw(st.booleans()):
        # To directory groups only: a token-only group is no group to know in common.
        # On a qualifying channel, or witnessed by whoever was there (every member?).
        channel = draw(st.sampled_from(["all-hands", "hallway"]))
        source |= {"kind": "announcement", "channel": channel}
        others = [a for a in body["audience"][:3] if a != f"group:{TOKEN_ONLY_GROUP}"]
        body["audience"] = [*others, f"group:{draw(st.sampled_from(GROUPS))}"]
        body["audience"] = list(dict.fromkeys(body["audience"]))
        if channel == "hallway":
            present = draw(st.lists(st.sampled_from(PEOPLE), unique=True, max_size=4))
            source["participants"] = present
            body["evidence"] += [{"kind": "witnessed", "ref": "room", "by": p} for p in present]
    if modality == "observed" and draw(st.booleans()):
        # A perception as the write policy accepts it: the holder (and whoever the view
        # is about) present, their witnessing cited.
        there = [p for p in (observer, observed) if p is not None]
        others = draw(st.lists(st.sampled_from(PEOPLE), unique=True, max_size=2))
        source |= {"kind": "perception", "participants": list(dict.fromkeys(there + others))}
        source.pop("speaker", None)
        body["evidence"] = [{"kind": "witnessed", "ref": "room", "by": p} for p in there]
    if observer is not None:
        body["observer_id"] = observer
    if observed is not None:
        body |= {
            "observed_id": observed,
            "observed_attitude": draw(st.sampled_from(["knows", "believes"])),
        }
    if (scope := draw(st.none() | st.sampled_from(SCOPES))) is not None:
        body["access_scope"] = scope
    if key is None and valid + 1 < len(TIMES) and draw(st.booleans()):
        # A keyless record may carry its own end (a keyed one is ended by its successor).
        body["invalid_at"] = TIMES[draw(st.integers(valid + 1, len(TIMES) - 1))]
    return Write("memories", body, marker)


@st.composite
def summarised_writes(draw: st.DrawFn, eraser: str) -> Write:
    """A record (record_writes) the relay may read, half the time held by `eraser` (the
    asker who erases at the end) and told to them in no scope: theirs to erase; and a
    summary of it, and a third of the time another (of it, or of the first summary: a
    derivation of a derivation)."""
    write: Write = draw(record_writes())
    body = write.body
    body["audience"] = [*body["audience"], RELAY]
    if draw(st.booleans()):
        body["audience"] = list(dict.fromkeys([*body["audience"], eraser]))
        body.pop("access_scope", None)
        body["observer_id"] = eraser
        if "speaker" in body["source"]:
            body["source"]["speaker"] = eraser
        if body.get("observed_id") == eraser:
            del body["observed_id"], body["observed_attitude"]
    made = [draw(summaries())]
    if draw(st.integers(0, 2)) == 0:
        made.append(draw(summaries(premise=draw(st.integers(0, 1)))))
    return replace(write, summaries=made)


@st.composite
def summaries(draw: st.DrawFn, premise: int = 0) -> Write:
    """A summary (keyless: a line of its own), told to some of those its premise is told
    to; its holder, modality and time are drawn."""
    marker = _marker()
    holder = draw(st.sampled_from(PEOPLE))
    body: dict[str, Any] = {
        "content": f"{holder} sums up {marker}",
        "proposition": {"text": f"the claim {marker}"},
        "observer_id": holder,
        "source_id": f"src-{draw(st.integers(0, 2))}",
        "source": {"kind": "document", "speaker": holder},
        "modality": draw(st.sampled_from(["believed", "asserted", "inferred"])),
        "confidence": draw(st.sampled_from([0.3, 0.9])),
        # Narrowed to the premise's when written.
        "audience": draw(audiences),
        "valid_at": draw(st.sampled_from(TIMES)),
        "provenance": {"method": "summary"},
    }
    return Write("memories", body, marker, premise=premise)


@st.composite
def observation_writes(draw: st.DrawFn) -> Write:
    marker = _marker()
    speaker = draw(st.sampled_from(PEOPLE))
    claim: dict[str, Any] = {
        "proposition": {"text": f"the claim {marker}", "key": draw(st.sampled_from(KEYS))},
        "hedged": draw(st.booleans()),
    }
    if (about := draw(st.none() | st.sampled_from(PEOPLE))) is not None:
        claim |= {"about": about, "attitude": draw(st.sampled_from(["knows", "believes"]))}
    body: dict[str, Any] = {
        "speaker": speaker,
        "source_id": "session-1",
        "participants": draw(st.lists(st.sampled_from(PEOPLE), unique=True, max_size=3)),
        "said_at": draw(st.sampled_from(TIMES)),
        "claims": [claim],
    }
    if (scope := draw(st.none() | st.sampled_from(SCOPES))) is not None:
        body["access_scope"] = scope
    return Write("observations", body, marker)


@st.composite
def witnessed_writes(draw: st.DrawFn) -> Write:
    """An event seen together: each witness's view, and each one's view of the others'."""
    marker = _marker()
    witnesses = draw(st.lists(st.sampled_from(PEOPLE), unique=True, min_size=1, max_size=3))
    body: dict[str, Any] = {
        "proposition": {
            "text": f"the claim {marker}",
            "key": draw(st.sampled_from(KEYS)),
            "value": draw(st.integers(0, 2)),
        },
        "witnessed_by": witnesses,
        "unnoticed": draw(st.lists(st.sampled_from(witnesses), unique=True, max_size=1)),
        "at": draw(st.sampled_from(TIMES)),
        "source_id": "room-1",
        "readers": draw(st.lists(st.sampled_from(PEOPLE), unique=True, max_size=1)),
    }
    if (scope := draw(st.none() | st.sampled_from(SCOPES))) is not None:
        body["access_scope"] = scope
    if draw(st.booleans()):
        speaker = draw(st.sampled_from(PEOPLE))
        body["announcement"] = {"speaker": speaker, "to": f"group:{draw(st.sampled_from(GROUPS))}"}
    return Write("witnessed", body, marker)


@st.composite
def queries(draw: st.DrawFn) -> Query:
    asker = draw(st.sampled_from(PEOPLE))
    return Query(
        asker=asker,
        token_groups=draw(
            st.lists(st.sampled_from([*GROUPS, TOKEN_ONLY_GROUP]), unique=True, max_size=2)
        ),
        # A group as audience member stands for "the whole group": only records
        # addressed to that very group admit it.
        audience=draw(
            st.lists(st.sampled_from([*PEOPLE, f"group:{GROUPS[0]}"]), unique=True, max_size=2)
        ),
        as_of=draw(st.none() | st.sampled_from(TIMES)),
        include_history=draw(st.booleans()),
        # Mostly asked as the person concerned, about one or two others.
        chain=tuple(draw(st.lists(st.sampled_from(PEOPLE), min_size=1, max_size=3))),
        chain_observer=draw(st.sampled_from([asker, asker, None, *PEOPLE])),
    )


grant_specs = st.builds(
    GrantSpec,
    subject=st.sampled_from(PEOPLE),
    reader=st.sampled_from([*PEOPLE, *(f"group:{g}" for g in (*GROUPS, TOKEN_ONLY_GROUP))]),
    categories=st.lists(st.sampled_from(CATEGORIES), min_size=1, max_size=2, unique=True).map(
        tuple
    ),
    revoked=st.integers(0, 3).map(lambda n: n == 0),
)


@st.composite
def categorised(draw: st.DrawFn, write: Write) -> Write:
    """A record write, sometimes with categories (what a grant discloses by)."""
    if write.via != "memories":
        return write
    labels = draw(st.lists(st.sampled_from(CATEGORIES), max_size=2, unique=True))
    return replace(write, body=write.body | {"categories": labels}) if labels else write


@st.composite
def worlds(draw: st.DrawFn) -> World:
    # Who asks last erases at the end: some records are theirs and summarised.
    asked = draw(st.lists(queries(), min_size=1, max_size=2))
    world = World(
        directory=draw(directories()),
        # Half the writes are records of any modality (what the policy tells apart most
        # finely: facts, knowledge, common knowledge), half of those with summaries of
        # them; the rest utterances and events seen.
        writes=draw(
            st.lists(
                st.one_of(
                    record_writes(),
                    summarised_writes(asked[-1].asker),
                    observation_writes(),
                    witnessed_writes(),
                ),
                min_size=1,
                max_size=7,
            )
        ),
        queries=asked,
        on_derived=draw(st.sampled_from(ON_DERIVED)),
        withhold=tuple(draw(st.lists(st.sampled_from(PREMISE_CHANGES), unique=True))),
    )
    world.writes = [draw(categorised(w)) for w in world.writes]
    world.grants = draw(st.lists(grant_specs, max_size=3))
    return world


def neighbour_record(marker: str) -> dict[str, Any]:
    """A record of the neighbouring tenant that everyone there may read."""
    return {
        "content": f"p0 holds {marker}",
        "proposition": {"text": f"the claim {marker}", "key": "k0", "value": 0},
        "observer_id": "p0",
        "source_id": "src-0",
        "source": {"kind": "conversation", "speaker": "p0"},
        "modality": "believed",
        "audience": [*PEOPLE, *(f"group:{g}" for g in GROUPS)],
        "valid_at": TIMES[0],
    }


def chain(records: dict[str, Record], record_id: str) -> list[Record]:
    """The supersession chain through one record, oldest first (from its links)."""
    start = records[record_id]
    older: list[Record] = []
    newer: list[Record] = []
    cursor = start
    while (previous := cursor.get("supersedes")) in records and len(older) < 100:
        cursor = records[previous]
        older.insert(0, cursor)
    cursor = start
    while (following := cursor.get("superseded_by")) in records and len(newer) < 100:
        cursor = records[following]
        newer.append(cursor)
    return [*older, start, *newer]
