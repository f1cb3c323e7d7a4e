"""The disclosure rules, stated plainly from docs/design.md, for tests only.

This is an independent statement of who may see a record and as what, written
from the design (§2 the record, §3 the contracts) and from what the directory
and config data mean, not from the Rego. The leak oracle compares the running
sidecar (real OPA, real store) with it: any disagreement is a bug in one of them.

The rules:
- Tenants are walls: a record of another tenant is never disclosed.
- Everyone who will hear the answer must be allowed: the asker always, and each
  named audience member. A person is admitted by a record when the record's
  audience names them, or names a `group:` they belong to. Group membership comes
  from the tenant directory; the asker's own token may add groups (a token speaks
  for its bearer alone, so the other audience members have only the directory).
- A record with an access scope also needs every hearer cleared for that scope
  (directory clearances; the dev identity carries no scope claims).
- Recall looks at a moment (as_of, default now): only versions whose valid time
  covers it (valid_at <= t < invalid_at). Get and history show any version.
- What a record may support (usable_as): a world-state claim is a fact only when
  an authoritative source supports it and it applied at the instant asked about
  (as_of, default now: a past recall returns what was current then), else an
  unverified claim; "X knows p" is knowledge only with evidence the evidence
  policy accepts for the knower, and when X is not the record's own holder only
  with evidence naming X (`by`: X's acknowledgement, or an announcement or
  change record that reached X): the holder's words establish the holder's view
  of X, never X's knowledge (docs/design.md §1); evidence counts only if it existed at
  the instant asked about (an item dated after it, or with a date that cannot be
  read, does not; an undated one does); common knowledge only from an
  announcement on a qualifying channel to groups that exist in the tenant's
  directory (a group nobody can enumerate is no group), or from an announcement
  on any channel to such groups that every one of their members was present for
  (listed among the source's participants, with an evidence item of kind
  `witnessed` by them); a claim about someone
  else's mind is a nested belief, whatever its modality (B_A(K_B p) is never
  returned as a fact, an unverified claim about the world, or common knowledge
  in a group holding B: docs/design.md §2), except "B knows p" with evidence tied to B;
  a view of a chain of two or more minds is a nested belief whatever it says;
  a speech act is never a belief: a statement (act said, about nobody else's mind)
  is a `statement`, what someone heard someone say (act heard) is `heard`;
  everything else is the holder's belief (a perception, `observed`, included:
  witnessing is no evidence of knowledge).

Minds (issue 26):
- A view of a chain of minds is either a stored record (observer and observed chain)
  or implied by one: a witness's perception of an event (modality observed, method
  witnessed) implies, for every chain of people it names as there (never its holder
  when nobody saw them, nobody twice in a row), that the holder thinks each of them
  saw it, to any depth; a statement to hearers implies, for every one present, that
  they heard the speaker say it and think the speaker believes it, and, the statement
  being public among them, that each thinks the others think so. An implied view is
  seen by exactly whoever may see the record implying it.
- One current view per mind: among the views a question may be shown of one holder's
  line (holder, chain of minds, key; what they heard someone say a line apart), the
  latest started by the instant asked about is current, the others superseded, even
  when they are current in their own chains (told to other audiences).

Derivations (docs/design.md §4, "Stale propagation", and §6 on erasure; issue 35):
- A record derived from others (`provenance.derived_from`) learns what became of each
  premise after it was made: superseded (a write gave the premise a successor),
  erased. Each such change is noted on it with when (`premise_changes`), and the same
  goes on down: a record derived from a noted one is noted `stale` (`withdrawn` when
  the one above had its valid time ended), up to eight levels.
- From the instant of its first note, a record whose valid time has not ended is
  served as `stale` rather than current; when `config.stale.withhold` names one of its
  notes' changes it is not disclosed at all, to anyone, for any purpose.
- Erasing a record does to what was derived from it what `config.erasure.on_derived`
  says: `flag` notes it (erased); `withdraw` notes it and ends its valid time then (or
  at its start, if that is later); `erase` erases it too, and what was derived from
  that, whoever may see them. The one who erased is told of the record they named
  alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from itertools import pairwise, product
from pathlib import Path
from typing import Any

CONFIG = Path(__file__).resolve().parents[2] / "rego" / "whose" / "config" / "data.json"

Record = dict[str, Any]


@dataclass(frozen=True)
class Person:
    """Someone who will hear an answer: the asker (with token groups) or an audience member."""

    id: str
    tenant: str
    token_groups: frozenset[str] = frozenset()


@dataclass
class TenantDirectory:
    scopes: dict[str, set[str]] = field(default_factory=dict)  # principal -> clearances
    groups: dict[str, set[str]] = field(default_factory=dict)  # group -> members

    def as_data(self, roles: dict[str, list[str]] | None = None) -> dict[str, Any]:
        """The same directory in policy data's shape (data.whose.directory.tenants[t])."""
        roles = roles or {}
        return {
            "principals": {
                p: {"roles": roles.get(p, []), "scopes": sorted(s)} for p, s in self.scopes.items()
            },
            "groups": {g: sorted(m) for g, m in self.groups.items()},
        }


@dataclass(frozen=True)
class Config:
    """The evidence policy, announcement channels and authoritative sources, what an
    erasure does to derivations and which premise changes withhold one (policy data)."""

    evidence_kinds: frozenset[str]
    signed_by_knower: frozenset[str]
    qualifying_channels: frozenset[str]
    authoritative_kinds: frozenset[str]
    on_derived: str = "flag"
    withhold: frozenset[str] = frozenset()

    @staticmethod
    def load(path: Path = CONFIG) -> Config:
        data = json.loads(path.read_text())
        return Config(
            evidence_kinds=frozenset(data["evidence"]["accepted_kinds"]),
            signed_by_knower=frozenset(data["evidence"]["signed_by_knower"]),
            qualifying_channels=frozenset(data["announcements"]["qualifying_channels"]),
            authoritative_kinds=frozenset(data["authoritative"]["source_kinds"]),
            on_derived=data["erasure"]["on_derived"],
            withhold=frozenset(data["stale"]["withhold"]),
        )


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def valid_at_instant(record: Record, t: datetime) -> bool:
    """The record's claim applied at t: it had started and had not yet ended."""
    if "valid_at" not in record or at(record["valid_at"]) > t:
        return False
    return "invalid_at" not in record or t < at(record["invalid_at"])


def existed_at(item: dict[str, Any], t: datetime) -> bool:
    """An evidence item existed at t: it is undated, or dated no later than t."""
    if "at" not in item:
        return True
    try:
        return at(item["at"]) <= t
    except (TypeError, ValueError, AttributeError):
        return False  # a date nobody can read proves nothing


class Model:
    def __init__(self, directories: dict[str, TenantDirectory], config: Config) -> None:
        self.directories = directories
        self.config = config
        # The subjects' grants in force, each (tenant, subject, reader, categories).
        self.grants: list[tuple[str, str, str, frozenset[str]]] = []

    # --- who may hear it -------------------------------------------------------

    def groups_of(self, person: Person) -> set[str]:
        directory = self.directories.get(person.tenant, TenantDirectory())
        listed = {g for g, members in directory.groups.items() if person.id in members}
        return listed | set(person.token_groups)

    def cleared(self, person: Person, scope: str) -> bool:
        directory = self.directories.get(person.tenant, TenantDirectory())
        return scope in directory.scopes.get(person.id, set())

    def may_hear(self, record: Record, person: Person) -> bool:
        if record.get("tenant") != person.tenant:
            return False
        scope = record.get("access_scope")
        if scope is not None and not self.cleared(person, scope):
            return False
        audience = record.get("audience", [])
        named = person.id in audience
        via_group = any(f"group:{g}" in audience for g in self.groups_of(person))
        return named or via_group or self.granted(record, person)

    def granted(self, record: Record, person: Person) -> bool:
        """A grant in force by the record's one subject to the person, by name or a group
        of theirs, of one of its categories (docs/consent.md). The subject is its holder
        (its observer, else its speaker, else its writer) when the record concerns no
        one else (no other speaker, no other mind it describes); otherwise no grant
        reaches it."""
        speaker = (record.get("source") or {}).get("speaker")
        holder = (
            record.get("observer_id") or speaker or (record.get("provenance") or {}).get("writer")
        )
        concerned = {holder, speaker, record.get("observed_id")} - {None}
        if concerned != {holder}:
            return False
        entries = {person.id, *(f"group:{g}" for g in self.groups_of(person))}
        categories = set(record.get("categories") or ())
        return any(
            tenant == person.tenant
            and subject == holder
            and reader in entries
            and categories & reach
            for tenant, subject, reader, reach in self.grants
        )

    def hearers(self, asker: Person, audience: Iterable[str]) -> list[Person]:
        others = [Person(a, asker.tenant) for a in audience if a != asker.id]
        return [asker, *others]

    def withheld(self, record: Record) -> bool:
        """A premise of the record changed in a way config.stale.withhold names."""
        return any(c["change"] in self.config.withhold for c in record.get("premise_changes", []))

    def allows(
        self,
        record: Record,
        asker: Person,
        *,
        purpose: str,
        now: datetime,
        audience: Iterable[str] = (),
        as_of: datetime | None = None,
    ) -> bool:
        if self.withheld(record):
            return False
        if not all(self.may_hear(record, p) for p in self.hearers(asker, audience)):
            return False
        if purpose == "recall":
            return valid_at_instant(record, as_of or now)
        return purpose in {"get", "history"}

    # --- as what ----------------------------------------------------------------

    def evidence_ok(self, record: Record, moment: datetime) -> bool:
        holder = record.get("observer_id")
        knower = (record.get("observed_path") or [None])[-1] or record.get("observed_id") or holder
        if knower is None:
            return False  # nobody to know anything
        about_someone_else = knower != holder
        for item in record.get("evidence", []):
            if item.get("kind") not in self.config.evidence_kinds or not item.get("ref"):
                continue
            if not existed_at(item, moment):
                continue
            names_the_knower = item.get("by") == knower
            if item["kind"] in self.config.signed_by_knower or about_someone_else:
                if names_the_knower:
                    return True
            else:
                return True  # a change record or announcement backs the holder's own claim
        return False

    def qualifying_announcement(self, record: Record) -> bool:
        source = record.get("source") or {}
        directory = self.directories.get(record.get("tenant", ""), TenantDirectory())
        audience = record.get("audience", [])
        groups = [a.removeprefix("group:") for a in audience if a.startswith("group:")]
        scope = record.get("access_scope")
        # Common knowledge in G is had by every member of G: each must be cleared.
        reaches_all = scope is None or all(
            scope in directory.scopes.get(member, set())
            for g in groups
            for member in directory.groups.get(g, set())
        )
        # Or every member of the groups was there: present, their witnessing cited.
        present = set(source.get("participants") or [])
        witnessed = {
            item.get("by") for item in record.get("evidence", []) if item.get("kind") == "witnessed"
        }
        all_there = all(
            member in present and member in witnessed
            for g in groups
            for member in directory.groups.get(g, set())
        )
        return (
            source.get("kind") == "announcement"
            and (source.get("channel") in self.config.qualifying_channels or all_there)
            and bool(groups)
            and all(g in directory.groups for g in groups)
            and reaches_all
        )

    def usable_as(self, record: Record, moment: datetime) -> str:
        """As what the record may be used, asked about `moment` (the as_of, else now)."""
        modality = record["modality"]
        if record.get("act") == "heard":
            return "heard"  # what the holder heard someone say: nobody's belief
        if record.get("act") == "said" and not record.get("observed_id"):
            return "statement"  # what the holder said: maybe a lie
        if record.get("observed_id") and modality in {"world_state", "common_knowledge"}:
            return "nested_belief"  # A's view of B's mind is never a shared claim
        if len(record.get("observed_path") or ()) > 1:
            return "nested_belief"  # A's view of B's view of C's knowledge is not C's
        if modality == "world_state":
            kind = (record.get("source") or {}).get("kind")
            authoritative = kind in self.config.authoritative_kinds
            current = valid_at_instant(record, moment)
            return "fact" if authoritative and current else "unverified_claim"
        if modality == "known" and self.evidence_ok(record, moment):
            return "knowledge"
        if modality == "common_knowledge" and self.qualifying_announcement(record):
            return "common_knowledge"
        return "nested_belief" if record.get("observed_id") else "belief"

    @staticmethod
    def obligations(usable_as: str) -> set[str]:
        # Always cite; attribute whatever is not a fact; verify an unverified claim first.
        duties = {"cite_source"}
        if usable_as != "fact":
            duties.add("attribute")
        if usable_as == "unverified_claim":
            duties.add("verify_before_acting")
        return duties


def status(record: Record, moment: datetime) -> str:
    """`superseded` once its valid time has ended, else `stale` from its first note of
    a premise change on, else `current`."""
    if "invalid_at" in record and at(record["invalid_at"]) <= moment:
        return "superseded"
    noted = [at(c["recorded_at"]) for c in record.get("premise_changes", [])]
    return "stale" if any(t <= moment for t in noted) else "current"


# --- derivations -----------------------------------------------------------------------

# How deep a change is noted, and an erasure cascades (levels of derivation).
LINEAGE_DEPTH = 8


def premises(record: Record) -> list[str]:
    return [str(p) for p in (record.get("provenance") or {}).get("derived_from", [])]


def derived_from(records: dict[str, Record], ids: Iterable[str]) -> list[Record]:
    wanted = set(ids)
    return [r for r in records.values() if wanted & set(premises(r))]


def note_changes(
    records: dict[str, Record],
    changes: dict[str, str],
    moment: datetime,
    *,
    withdraw: Iterable[str] = (),
    skip: Iterable[str] = (),
) -> int:
    """What became of some records (`changes`: id -> superseded or erased), noted on
    what was derived from them and on down; records derived from one in `withdraw`
    also end their valid time at `moment` (at their start, if later) unless it has
    ended already. A record is visited once; it passes the change on only when this
    changed it (a note it had already is not news). Returns how many it changed."""
    done = set(skip)
    level, ending = dict(changes), set(withdraw)
    changed = 0
    for _ in range(LINEAGE_DEPTH):
        below = [r for r in derived_from(records, level) if r["id"] not in done]
        if not below:
            break
        following: dict[str, str] = {}
        for record in below:
            notes = record.setdefault("premise_changes", [])
            known = {(c["premise"], c["change"]) for c in notes}
            new = [
                (p, level[p])
                for p in sorted(set(premises(record)) & level.keys())
                if (p, level[p]) not in known
            ]
            notes += [{"premise": p, "change": c, "recorded_at": iso(moment)} for p, c in new]
            if not notes:
                del record["premise_changes"]
            ended = "invalid_at" in record and at(record["invalid_at"]) <= moment
            withdrawn = bool(ending & set(premises(record))) and not ended
            if withdrawn:
                record["invalid_at"] = iso(max(moment, at(record["valid_at"])))
            if new or withdrawn:
                following[record["id"]] = "withdrawn" if withdrawn else "stale"
        done |= {r["id"] for r in below}
        changed += len(following)
        level, ending = following, set()
    return changed


def cascade(records: dict[str, Record], erased: Iterable[str]) -> set[str]:
    """Everything an erasure of `erased` erases with them under on_derived `erase`:
    what was derived from them, and from that, down to LINEAGE_DEPTH levels."""
    found = set(erased)
    frontier = set(found)
    for _ in range(LINEAGE_DEPTH):
        frontier = {r["id"] for r in derived_from(records, frontier)} - found
        if not frontier:
            break
        found |= frontier
    return found - set(erased)


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def chain_of(record: Record) -> tuple[Any, ...] | None:
    """Which line of views a keyed record belongs to: one holder's views of one
    proposition, told to one audience. The holder is the observer; a claim without
    one is held by the speaker it records, else (no speaker) by its writer."""
    key = (record.get("proposition") or {}).get("key")
    if not key:
        return None
    observer = record.get("observer_id")
    speaker = None if observer else (record.get("source") or {}).get("speaker")
    writer = None if observer or speaker else (record.get("provenance") or {}).get("writer")
    return (
        record["tenant"],
        observer,
        speaker,
        writer,
        record.get("observed_id"),
        tuple(record.get("observed_path") or ()),
        key,
        frozenset(record.get("audience", [])),
        record.get("access_scope"),
    )


def link_chains(records: list[Record]) -> None:
    """Supersession, stated plainly: each line is ordered by valid time (at one
    instant, the later write after the earlier); each version ends where the next
    begins and names it, and is named by it. `records` in the order written."""
    lines: dict[tuple[Any, ...], list[tuple[datetime, int, Record]]] = {}
    for order, record in enumerate(records):
        line = chain_of(record)
        if line is None:
            continue
        for linked in ("supersedes", "superseded_by", "invalid_at"):
            record.pop(linked, None)
        lines.setdefault(line, []).append((at(record["valid_at"]), order, record))
    for versions in lines.values():
        versions.sort(key=lambda v: (v[0], v[1]))
        for (_, _, older), (_, _, newer) in pairwise(versions):
            older |= {"superseded_by": newer["id"], "invalid_at": newer["valid_at"]}
            newer["supersedes"] = older["id"]


# --- minds -----------------------------------------------------------------------------


def mind_path(record: Record) -> tuple[str, ...]:
    """The chain of minds a record is a view of, after its holder."""
    if record.get("observed_path"):
        return tuple(record["observed_path"])
    return (record["observed_id"],) if record.get("observed_id") else ()


def line(record: Record) -> tuple[Any, ...] | None:
    """Whose line of views a record is a version of (None: nobody's mind, or keyless)."""
    key = (record.get("proposition") or {}).get("key")
    if not record.get("observer_id") or not key:
        return None
    return (record["observer_id"], mind_path(record), key, record.get("act") == "heard")


def superseded_in_mind(record: Record, shown: Iterable[Record], t: datetime) -> bool:
    """A later version of the record's line, started by t, is among `shown`."""
    mine = line(record)
    if mine is None:
        return False
    start = at(record["valid_at"])
    return any(
        line(other) == mine and start < at(other["valid_at"]) <= t
        for other in shown
        if other is not record
    )


def _no_repeat(minds: tuple[str, ...]) -> bool:
    return all(a != b for a, b in pairwise(minds))


def implies(base: Record, holder: str, path: tuple[str, ...], heard: bool) -> bool:
    """Whether `base` implies the view (holder; path), heard or believed."""
    source = base.get("source") or {}
    present = list(source.get("participants") or [])
    if not path:
        return False
    perception = (
        base.get("modality") == "observed"
        and (base.get("provenance") or {}).get("method") == "witnessed"
        and not base.get("observed_id")
    )
    if perception:
        seen = set(present) - set(source.get("unnoticed") or [])
        return (
            not heard
            and holder == base.get("observer_id")
            and all(p in seen for p in path)
            and _no_repeat((holder, *path))
        )
    if base.get("act") == "said" and base.get("observer_id"):
        speaker, claim = base["observer_id"], mind_path(base)
        told = path[: len(path) - len(claim)]
        if len(path) < len(claim) + 1 or path[len(told) :] != claim or told[-1] != speaker:
            return False
        if heard and speaker in told[:-1]:
            return False  # a chain of hearers never names the speaker (derived.view)
        return holder in present and all(p in present for p in told) and _no_repeat((holder, *told))
    return False


def heard_chain(record: Record) -> tuple[str, ...]:
    """Who, in a view of what was heard, heard the speaker: the minds before the speaker
    (`source.speaker`, first found; else the first mind)."""
    path = mind_path(record)
    speaker = (record.get("source") or {}).get("speaker")
    return path[: path.index(speaker)] if speaker in path else ()


def implied_view(base: Record, holder: str, path: tuple[str, ...], heard: bool) -> Record:
    """The view as the answer shows it: the base's claim, held by `holder`."""
    view = {k: v for k, v in base.items() if k not in ("supersedes", "superseded_by")}
    view |= {"observer_id": holder, "observed_id": path[0], "derived_from": base["id"]}
    view["observed_path"] = list(path) if len(path) > 1 else None
    view["act"] = "heard" if heard else None
    view["modality"] = "observed" if base.get("modality") == "observed" else "believed"
    view.pop("invalid_at", None)
    return {k: v for k, v in view.items() if v is not None}


def implied_paths(base: Record, depth: int) -> set[tuple[str, tuple[str, ...], bool]]:
    """Every (holder, path, heard) a base implies, to `depth` minds (brute force)."""
    source = base.get("source") or {}
    people = sorted(set(source.get("participants") or []) | {base.get("observer_id") or ""})
    found = set()
    holders = people if base.get("act") == "said" else [base.get("observer_id") or ""]
    for holder in holders:
        for size in range(1, depth + 1):
            for path in product(people, repeat=size):
                for heard in (False, True):
                    if implies(base, holder, path, heard):
                        found.add((holder, path, heard))
    return found
