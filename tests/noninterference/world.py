"""The two-store worlds: a fixed directory, records, the asker, and what the asker sends.

Every tenant `t00000`, `t00001`, ... of the prepared policy holds the same
directory (DIRECTORY below), and every example takes a tenant of its own, so
examples never see each other. Records name each other through `Ref`s (the
shared world's records, the hidden ones, the asker's own writes, a missing id),
which each store resolves to the ids it answered with: the requests of both
stores are the same up to those ids.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

COLLECTION = "whose_memories"
VECTOR_SIZE = 384

# --- the directory every tenant holds --------------------------------------------

PEOPLE = ("alice", "bob", "carol", "dave", "eve")  # eve is in no directory: an outsider
RELAY = "scribe"  # role extractor: writes other people's views, often ones it cannot read
BUILDER = "builder"  # writes the worlds: extractor and authority, cleared for every scope
BUILDER_ROLES = "extractor,authority"
ASKERS = (*PEOPLE, RELAY)
CLEARANCES: dict[str, tuple[str, ...]] = {
    "alice": ("s1",),
    "bob": (),
    "carol": ("s1", "s2"),
    "dave": ("s2",),
    BUILDER: ("s1", "s2"),
    RELAY: (),
}
ROLES: dict[str, tuple[str, ...]] = {BUILDER: ("extractor", "authority"), RELAY: ("extractor",)}
GROUPS: dict[str, tuple[str, ...]] = {
    "team": ("alice", "bob", "carol"),
    "core": ("alice", "carol"),
    "ops": ("dave", RELAY),
}
TOKEN_ONLY_GROUP = "guests"  # no directory defines it: only askers' tokens name it
ALL_GROUPS = (*GROUPS, TOKEN_ONLY_GROUP)
SCOPES = ("s1", "s2")
ENTRIES = (*PEOPLE, RELAY, *(f"group:{g}" for g in ALL_GROUPS))
KEYS = ("k0", "k1")
TIMES = (
    "2025-12-01T00:00:00Z",
    "2026-01-01T00:00:00Z",
    "2026-02-01T00:00:00Z",
    "2026-03-01T00:00:00Z",
    "2100-01-01T00:00:00Z",  # not yet valid: a future-dated version
)
# Record categories a grant may name (the shipped vocabulary holds both).
CATEGORIES = ("appointments", "clinical")
AS_OF = (*TIMES, "2026-01-15T00:00:00Z", "2026-02-15T00:00:00Z", "2099-01-01T00:00:00Z")
MODALITIES = ("believed", "asserted", "reported_belief", "world_state", "known")


def tenant_directory() -> dict[str, Any]:
    """One tenant's entry in data.whose.directory.tenants."""
    return {
        "principals": {
            p: {"roles": list(ROLES.get(p, ())), "scopes": list(s)} for p, s in CLEARANCES.items()
        },
        "groups": {g: list(members) for g, members in GROUPS.items()},
    }


def tenant_name(number: int) -> str:
    return f"t{number:05d}"


def foreign(tenant: str) -> str:
    """Another tenant, for records the asker's tenant wall must hide (in no directory)."""
    return f"{tenant}x"


@dataclass(frozen=True)
class Asker:
    """Who asks, for a whole example: a principal and the groups their token claims."""

    id: str
    groups: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return self.id + (f"(token groups {','.join(self.groups)})" if self.groups else "")

    def member_of(self) -> set[str]:
        listed = {g for g, members in GROUPS.items() if self.id in members}
        return listed | set(self.groups)

    def admitted_by(self, entry: str) -> bool:
        if entry.startswith("group:"):
            return entry.removeprefix("group:") in self.member_of()
        return entry == self.id

    def cleared(self, scope: str) -> bool:
        return scope in CLEARANCES.get(self.id, ())

    def may_see(
        self, tenant: str, record: dict[str, Any], grants: tuple[GrantDraw, ...] = ()
    ) -> bool:
        """The hard constraints (tenant, audience, scope) of the disclosure policy; the
        audience, or a grant in force (one not drawn to end before the requests) by
        the record's holder of one of its categories (whose.disclosure.granted)."""
        if record.get("tenant") != tenant:
            return False
        scope = record.get("access_scope")
        if scope is not None and not self.cleared(scope):
            return False
        if any(self.admitted_by(e) for e in record.get("audience", [])):
            return True
        holder = (
            record.get("observer_id")
            or (record.get("source") or {}).get("speaker")
            or (record.get("provenance") or {}).get("writer")
        )
        return any(
            not g.ends
            and g.subject == holder
            and self.admitted_by(g.reader)
            and set(g.categories) & set(record.get("categories") or ())
            for g in grants
        )


# --- ids ---------------------------------------------------------------------------

_IDS = uuid.UUID("0b7d4c52-8a9e-4f13-b2c6-5d7e8f9a0b1c")

RefKind = Literal["base", "hidden", "mine", "missing"]


@dataclass(frozen=True)
class Ref:
    """An id the asker (or the world) names: the store's id for that record.

    base#i: the i-th record of the shared world; hidden#j: the j-th hidden record
    (its id in store B, the same literal sent to A, where it names nothing);
    mine#k: the asker's k-th stored record (modulo how many there are);
    missing: an id no store holds.
    """

    kind: RefKind
    index: int = 0

    def __repr__(self) -> str:
        return "missing" if self.kind == "missing" else f"{self.kind}#{self.index}"


@dataclass(frozen=True)
class Frag:
    """A fragment of a referenced id, for text matching: one of its five hex groups,
    or (part 5) the first and last group as two words."""

    ref: Ref
    part: int

    def __repr__(self) -> str:
        return f"frag({self.ref!r},{self.part})"


def chosen_id(label: str) -> str:
    """A client-chosen id, the same in both stores and in every run."""
    return str(uuid.uuid5(_IDS, label))


MISSING_ID = chosen_id("missing")


def fragment(record_id: str, part: int) -> str:
    groups = record_id.split("-")
    return f"{groups[0]} {groups[4]}" if part == 5 else groups[part]


@lru_cache(maxsize=4096)
def vector(seed: int) -> tuple[float, ...]:
    """A caller-supplied embedding: distinct per seed, so scores never tie."""
    rng = random.Random(seed)
    return tuple(round(rng.uniform(-1, 1), 6) for _ in range(VECTOR_SIZE))


# --- records -------------------------------------------------------------------------

HideBy = Literal["audience", "scope", "tenant"]


@dataclass(frozen=True)
class GrantDraw:
    """A grant a subject gives before the world is written (in both stores alike):
    `ends`, it ends before the asker's first request (an expiry, with no write)."""

    subject: str
    reader: str
    categories: tuple[str, ...]
    purpose: str | None = None
    ends: bool = False

    def __repr__(self) -> str:
        shown = f"{self.subject}->{self.reader}:{','.join(self.categories)}"
        return shown + (f"/{self.purpose}" if self.purpose else "") + (" ends" if self.ends else "")


@dataclass(frozen=True, repr=False)
class Rec:
    """A record as written (by the builder for the worlds, by the asker in requests)."""

    seed: int  # vector, text, and (when `id` is "chosen") the id
    holder: str | None
    key: str | None
    value: int
    modality: str
    audience: tuple[str, ...]
    valid_at: str
    # "chosen": a client-chosen id (from the seed); a Ref: that id; None: the sidecar picks.
    id: Literal["chosen"] | Ref | None = "chosen"
    scope: str | None = None
    about: str | None = None
    evidence: tuple[tuple[str, str], ...] = ()  # (kind, by)
    derived_from: tuple[Ref, ...] = ()
    supersedes: Ref | None = None
    source_kind: str = "conversation"
    confidence: float = 0.9
    hidden_by: HideBy | None = None  # for hidden records: what hides them from the asker
    # A nested view: the minds after `about` (observed_path is about + deeper).
    deeper: tuple[str, ...] = ()
    # Who was there: a perception (`perceived`, the holder's own of an event, the base
    # of nested views) or a statement (`said`, the base of what hearers heard).
    participants: tuple[str, ...] = ()
    perceived: bool = False
    unnoticed: bool = False  # a perception nobody else saw its holder make
    said: bool = False
    # What a subject's grant may disclose it by (world.GrantDraw).
    categories: tuple[str, ...] = ()

    @property
    def foreign(self) -> bool:
        return self.hidden_by == "tenant"

    def literal_id(self) -> str:
        return chosen_id(f"record-{self.seed}")

    def __repr__(self) -> str:
        who = self.holder or "nobody"
        parts = [f"{who}:{self.modality}"]
        if self.perceived:
            parts.append("perceived" + ("(unnoticed)" if self.unnoticed else ""))
        if self.said:
            parts.append("said")
        if self.participants:
            parts.append(f"with=[{','.join(self.participants)}]")
        if self.about:
            parts.append(f"about={'>'.join((self.about, *self.deeper))}")
        parts.append(f"{self.key or 'keyless'}={self.value}")
        parts.append(f"aud=[{','.join(self.audience)}]")
        if self.scope:
            parts.append(f"scope={self.scope}")
        parts.append(f"valid={self.valid_at[:10]}")
        if self.id != "chosen":
            parts.append(f"id={self.id!r}")
        if self.supersedes is not None:
            parts.append(f"supersedes={self.supersedes!r}")
        if self.derived_from:
            parts.append(f"derived_from={list(self.derived_from)!r}")
        if self.evidence:
            parts.append("evidence=" + ",".join(f"{k}/{b}" for k, b in self.evidence))
        if self.source_kind != "conversation":
            parts.append(f"source={self.source_kind}")
        if self.categories:
            parts.append(f"cat={','.join(self.categories)}")
        if self.hidden_by:
            parts.append(f"hidden_by={self.hidden_by}")
        return f"<{' '.join(parts)}>"

    def body(self, resolve: Resolver, with_vector: bool = True) -> dict[str, Any]:
        """The JSON of POST /v1/memories (and of a Qdrant payload, without the vector)."""
        text = f"claim {self.seed} on {self.key or 'nothing'} is {self.value}"
        proposition: dict[str, Any] = {"text": text, "value": self.value}
        if self.key is not None:
            proposition["key"] = self.key
        source: dict[str, Any] = {"kind": "perception" if self.perceived else self.source_kind}
        if self.holder is not None and not self.perceived:
            source["speaker"] = self.holder
        if self.participants:
            source["participants"] = list(self.participants)
        if self.unnoticed and self.holder is not None:
            source["unnoticed"] = [self.holder]
        body: dict[str, Any] = {
            "content": f"{self.holder or 'the system'} holds that {text}",
            "proposition": proposition,
            "source_id": f"src-{self.seed % 2}",
            "source": source,
            "modality": self.modality,
            "confidence": self.confidence,
            "audience": list(self.audience),
            "valid_at": self.valid_at,
        }
        if self.id == "chosen":
            body["id"] = self.literal_id()
        elif isinstance(self.id, Ref):
            body["id"] = resolve.id(self.id)
        if self.holder is not None:
            body["observer_id"] = self.holder
        if self.about is not None:
            body |= {"observed_id": self.about, "observed_attitude": "believes"}
            if self.deeper:
                body["observed_path"] = [self.about, *self.deeper]
        if self.said:
            body["act"] = "said"
        if self.scope is not None:
            body["access_scope"] = self.scope
        if self.categories:
            body["categories"] = list(self.categories)
        if self.evidence:
            body["evidence"] = [{"kind": k, "ref": f"ref-{k}", "by": b} for k, b in self.evidence]
        if self.perceived:
            body["evidence"] = [
                {"kind": "witnessed", "ref": "room-1", "by": who}
                for who in (self.holder, self.about, *self.deeper)
                if who is not None
            ]
        provenance: dict[str, Any] = {"method": "witnessed"} if self.perceived else {}
        if self.derived_from:
            provenance["derived_from"] = [resolve.id(r) for r in self.derived_from]
        if provenance:
            body["provenance"] = provenance
        if self.supersedes is not None:
            body["supersedes"] = resolve.id(self.supersedes)
        if with_vector:
            body["vector"] = list(vector(self.seed))
        return body


class Resolver:
    """One store's ids for the Refs of an example."""

    def __init__(self) -> None:
        self.base: list[str] = []
        self.hidden: list[str] = []
        self.mine: list[str] = []
        # Forget rules the asker set, in the order set (harness.run_forget_rule).
        self.rules: list[str] = []

    def id(self, ref: Ref) -> str:
        pool = {"base": self.base, "hidden": self.hidden, "mine": self.mine}.get(ref.kind)
        if not pool:
            return MISSING_ID
        return pool[ref.index % len(pool)]

    def resolve(self, value: Any) -> Any:
        """A JSON-like value with its Refs and Frags replaced by this store's ids."""
        if isinstance(value, Ref):
            return self.id(value)
        if isinstance(value, Frag):
            return fragment(self.id(value.ref), value.part)
        if isinstance(value, dict):
            return {k: self.resolve(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.resolve(v) for v in value]
        return value


# --- what the asker sends ------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class Op:
    """One request of the asker (a scroll follows its pages: one request per page)."""

    kind: str
    args: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.args.items() if v not in (None, [], ()))
        return f"{self.kind}({shown})"


# What config.erasure.on_derived may say, and the premise changes config.stale.withhold
# may name (rego/whose/config/data.json, schemas/config).
ON_DERIVED = ("flag", "withdraw", "erase")
PREMISE_CHANGES = ("superseded", "erased", "withdrawn", "stale")


@dataclass(frozen=True)
class PolicyData:
    """The policy data an example runs under (data.whose.config), written into both
    stores' OPAs before the example's first request (harness.Stores.enter)."""

    on_derived: str = "flag"
    withhold: tuple[str, ...] = ()

    def documents(self) -> dict[str, Any]:
        """data.whose.config paths (under config/) and their values."""
        return {"erasure/on_derived": self.on_derived, "stale/withhold": list(self.withhold)}

    def __repr__(self) -> str:
        return f"on_derived={self.on_derived} stale.withhold=[{','.join(self.withhold)}]"


@dataclass(frozen=True, repr=False)
class Case:
    """One example: who asks, the shared world, the hidden records (store B only,
    each written just before the shared record at its position), the requests, and
    (when drawn) the policy data it runs under."""

    asker: Asker
    shared: tuple[Rec, ...]
    hidden: tuple[tuple[int, Rec], ...]
    ops: tuple[Op, ...]
    data: PolicyData | None = None
    # Grants given before the world is written, in both stores (Plan.grants).
    grants: tuple[GrantDraw, ...] = ()

    def grants_in_play(self) -> tuple[GrantDraw, ...]:
        """The world's grants and those the asker's own requests give (of the asker's
        records: a grant to a group the asker is in shows the asker what its audience
        did not, from that request on)."""
        given = tuple(
            GrantDraw(self.asker.id, op.args["reader"], op.args["categories"], op.args["purpose"])
            for op in self.ops
            if op.kind == "grant"
        )
        return self.grants + given

    def steps(self, with_hidden: bool) -> list[tuple[str, int, Rec]]:
        """The build order: ("base", i, record) and, with_hidden, ("hidden", j, record)."""
        order: list[tuple[str, int, Rec]] = []
        for i in range(len(self.shared) + 1):
            if with_hidden:
                order += [("hidden", j, r) for j, (at, r) in enumerate(self.hidden) if at == i]
            if i < len(self.shared):
                order.append(("base", i, self.shared[i]))
        return order

    def __repr__(self) -> str:
        lines = [f"Case(asker={self.asker!r}"]
        if self.data is not None:
            lines.append(f"  policy data: {self.data!r}")
        lines += [f"  grant#{i} = {g!r}" for i, g in enumerate(self.grants)]
        lines += [f"  base#{i} = {r!r}" for i, r in enumerate(self.shared)]
        lines += [
            f"  hidden#{j} (before base#{at}) = {r!r}" for j, (at, r) in enumerate(self.hidden)
        ]
        lines += [f"  request {n}: {op!r}" for n, op in enumerate(self.ops)]
        return "\n".join(lines) + ")"
