"""Hypothesis strategies: the asker, the shared world, the hidden records, the requests.

Small name spaces on purpose (five people, two keys, five instants), so that the
hidden records land in the asker's own chains, in other holders' chains on the
same keys, before and after shared versions, and so that the asker's filters,
ids and writes meet them.

Environment variables narrow a run for triage: WHOSE_NI_OPS (request kinds, see
harness.RUNNERS) and WHOSE_NI_HIDE (how hidden records are hidden: audience,
scope, tenant), comma-separated; WHOSE_NI_HIDDEN_FIRST=1 writes every hidden
record first and dates it first (a hidden version is then never the successor
of a shared one, the commonest difference).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

from hypothesis import strategies as st

from tests.noninterference.world import (
    ALL_GROUPS,
    AS_OF,
    ASKERS,
    BUILDER,
    CATEGORIES,
    ENTRIES,
    KEYS,
    MODALITIES,
    ON_DERIVED,
    PEOPLE,
    PREMISE_CHANGES,
    RELAY,
    SCOPES,
    TIMES,
    Asker,
    Case,
    Frag,
    GrantDraw,
    HideBy,
    Op,
    PolicyData,
    Rec,
    Ref,
)

OP_KINDS = (
    "recall",
    "propositions",
    "get",
    "history",
    "query",
    "search",
    "scroll",
    "count",
    "retrieve",
    "point",
    "write",
    "upsert",
    "observe",
    "membership",
    "witness",
    "mcp",
    "erase",
    "delete",
    "set_payload",
    # Forgetting (docs/forgetting.md): a standing rule, lifting one, a request by content.
    "forget_rule",
    "lift",
    "erasure",
)
# Requests about grants (policy/grants.py): the asker gives, revokes and lists them.
GRANT_KINDS = ("grant", "revoke", "grants")
# The MCP tools (sidecar/mcp/tools.py), over streamable HTTP with the asker's token.
MCP_TOOLS = ("recall", "get_memory", "history", "what_do_people_think", "remember", "forget")
HIDE_BY: tuple[HideBy, ...] = ("audience", "scope", "tenant")


def _chosen(variable: str, every: tuple[str, ...]) -> tuple[str, ...]:
    raw = os.environ.get(variable, "").strip()
    if not raw:
        return every
    chosen = tuple(x.strip() for x in raw.split(",") if x.strip())
    unknown = set(chosen) - set(every)
    if unknown:
        raise ValueError(f"{variable}: unknown {sorted(unknown)}; known: {', '.join(every)}")
    return chosen


@dataclass(frozen=True)
class Plan:
    """How big an example is (the number of examples comes from the profile)."""

    shared: tuple[int, int] = (0, 5)
    hidden: tuple[int, int] = (1, 3)
    ops: tuple[int, int] = (1, 10)
    op_kinds: tuple[str, ...] = OP_KINDS
    hide_by: tuple[HideBy, ...] = HIDE_BY
    hidden_first: bool = False
    # Derivations (what an erasure's `on_derived` and `stale.withhold` act on): shared
    # records name the builder in their audience, so that records derived from them
    # can be written (the write policy wants the writer to see every premise), half of
    # them are the asker's (theirs to erase); two thirds of the hidden records written
    # after a shared one derive from one (most premises are the asker's), erasures
    # mostly name such a premise, and every example with one erases one.
    derivations: bool = False
    # Draw the policy data each example runs under (world.PolicyData).
    policy_data: bool = False
    # Draw record categories and grants given before the world is written (some
    # ending before the first request); a hidden record no grant in force reveals.
    grants: bool = False

    @staticmethod
    def from_env(**sizes: Any) -> Plan:
        hide_by: Any = _chosen("WHOSE_NI_HIDE", HIDE_BY)
        first = os.environ.get("WHOSE_NI_HIDDEN_FIRST", "") == "1"
        kinds = _chosen("WHOSE_NI_OPS", OP_KINDS)
        return Plan(op_kinds=kinds, hide_by=hide_by, hidden_first=first, **sizes)


people = st.sampled_from(PEOPLE)
times = st.sampled_from(TIMES)
keyed = st.sampled_from((*KEYS, *KEYS, *KEYS, None))  # mostly keyed: chains
scopes = st.sampled_from((None, None, None, "s1", "s2"))
askers = st.builds(
    Asker,
    id=st.sampled_from(ASKERS),
    groups=st.lists(st.sampled_from(ALL_GROUPS), unique=True, max_size=2).map(tuple),
)


def audiences(pool: tuple[str, ...] | list[str]) -> st.SearchStrategy[tuple[str, ...]]:
    return st.lists(st.sampled_from(pool), min_size=1, max_size=3, unique=True).map(tuple)


@st.composite
def records(
    draw: st.DrawFn,
    seed: int,
    holders: tuple[str, ...],
    premises: st.SearchStrategy[Ref] | None,
) -> Rec:
    """A record of any modality the write policy can accept (and some it refuses)."""
    modality = draw(st.sampled_from(MODALITIES))
    holder: str | None = draw(st.sampled_from(holders))
    if modality == "world_state" and draw(st.booleans()):
        holder = None  # its chain is held by its writer
    about = None
    if modality != "world_state" and draw(st.integers(0, 4)) == 0:
        about = draw(st.sampled_from([p for p in PEOPLE if p != holder]))
    evidence: tuple[tuple[str, str], ...] = ()
    if modality == "known":
        evidence = (("acknowledgement", about or holder or BUILDER),)
    elif draw(st.integers(0, 3)) == 0:
        evidence = ((draw(st.sampled_from(("acknowledgement", "document"))), draw(people)),)
    derived: tuple[Ref, ...] = ()
    if premises is not None and draw(st.integers(0, 3)) == 0:
        derived = tuple(draw(st.lists(premises, min_size=1, max_size=2, unique=True)))
    kind = "change_record" if modality == "world_state" and draw(st.booleans()) else "conversation"
    deeper: tuple[str, ...] = ()
    if about is not None and draw(st.booleans()):
        deeper = tuple(draw(st.lists(people, min_size=1, max_size=2)))
    # Bases of derived views: a witness's perception of an event, a statement to hearers.
    base = draw(st.sampled_from((None, None, None, "perceived", "said")))
    participants: tuple[str, ...] = ()
    perceived = said = unnoticed = False
    if base is not None and holder is not None:
        others = draw(st.lists(people, max_size=3, unique=True))
        participants = tuple(dict.fromkeys((holder, *others)))
        if base == "perceived":
            perceived, modality, about, deeper = True, "observed", None, ()
            unnoticed = draw(st.integers(0, 3)) == 0
            evidence = ()
        else:
            said = True
            modality = "asserted" if modality in ("world_state", "known") else modality
            evidence = () if modality != "known" else evidence
    return Rec(
        seed=seed,
        holder=holder,
        key=draw(keyed),
        value=draw(st.integers(0, 2)),
        modality=modality,
        deeper=deeper,
        participants=participants,
        perceived=perceived,
        unnoticed=unnoticed,
        said=said,
        audience=draw(audiences(ENTRIES)),
        valid_at=draw(times),
        scope=draw(scopes),
        about=about,
        evidence=evidence,
        derived_from=derived,
        source_kind=kind,
        confidence=draw(st.sampled_from((0.3, 0.9))),
    )


def _holders(asker: Asker) -> tuple[str, ...]:
    # The asker's own chains, often.
    return (asker.id, asker.id, *PEOPLE) if asker.id in PEOPLE else PEOPLE


@st.composite
def shared_records(draw: st.DrawFn, asker: Asker, derivations: bool = False) -> Rec:
    """A record of the shared world (numbered by `cases`)."""
    premises = st.builds(Ref, st.just("base"), st.integers(0, 4))
    record = draw(records(0, _holders(asker), premises))
    if draw(st.booleans()):
        # Lean towards what the asker may see (or else there is little to compare).
        visible = [e for e in ENTRIES if asker.admitted_by(e)] or [asker.id]
        audience = tuple(dict.fromkeys((draw(st.sampled_from(visible)), *record.audience)))
        record = replace(record, audience=audience[:3])
    if derivations:
        if draw(st.booleans()):
            record = draw(owned(asker, record))
        # The builder may read it: what is derived from it can be written.
        record = replace(record, audience=tuple(dict.fromkeys((*record.audience, BUILDER))))
    return record


@st.composite
def owned(draw: st.DrawFn, asker: Asker, record: Rec) -> Rec:
    """`record` held by the asker, and one the asker sees: theirs to erase. (Its
    audience only gains an entry: what was derived from it stays within it.)"""
    if record.about == asker.id:
        record = replace(record, about=None, deeper=())
    record = _same_chain(record, replace(record, holder=asker.id))
    visible = [e for e in ENTRIES if asker.admitted_by(e)] or [asker.id]
    audience = tuple(dict.fromkeys((draw(st.sampled_from(visible)), *record.audience)))
    cleared = record.scope is None or asker.cleared(record.scope)
    return replace(record, audience=audience, scope=record.scope if cleared else None)


def _sees(asker: Asker, record: Rec) -> bool:
    return any(asker.admitted_by(e) for e in record.audience) and (
        record.scope is None or asker.cleared(record.scope)
    )


@st.composite
def derivations(draw: st.DrawFn, asker: Asker, shared: tuple[Rec, ...], at: int) -> Rec:
    """A record derived from a shared one written before it (base#i, i < at), hidden
    from the asker by its audience: entries of the premise's audience that do not admit
    the asker (the builder's at least), so the write policy's `derived_audience_wider`
    and `derived_scope_wider` let it be stored; dated with its premise (a derivation
    must not start after its premise stopped applying). The premise is, when there is
    one, a record the asker holds and may see: theirs to erase."""
    own = [i for i in range(at) if shared[i].holder == asker.id and _sees(asker, shared[i])]
    index = draw(st.sampled_from(own or range(at)))
    premise = shared[index]
    record = draw(records(0, _holders(asker), None))
    if draw(st.booleans()):
        record = _same_chain(record, draw(st.sampled_from(shared)))
    pool = [e for e in premise.audience if not asker.admitted_by(e)]
    audience = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=2, unique=True))
    return replace(
        record,
        audience=tuple(audience),
        scope=premise.scope,
        valid_at=premise.valid_at,
        derived_from=(Ref("base", index),),
        hidden_by="audience",
    )


def _earlier(record: Rec, seed: int, written: int) -> Rec:
    """Numbered, and deriving only from shared records written before it."""
    derived = tuple(r for r in record.derived_from if r.kind != "base" or r.index < written)
    return replace(record, seed=seed, derived_from=derived)


def _same_chain(record: Rec, other: Rec) -> Rec:
    """`record` moved into `other`'s chain (holder, observed, key)."""
    modality = record.modality
    if other.holder is None:
        modality = "world_state"  # a chain without a holder is its writer's world state
    elif modality == "world_state" and other.about is not None:
        modality = "believed"  # a world state about someone's mind is refused
    evidence = record.evidence
    if modality == "known":
        evidence = (("acknowledgement", other.about or other.holder or BUILDER),)
    if record.perceived and (other.holder is None or other.about is not None):
        # A perception is its holder's own view (no observed mind): a plain record then.
        record = replace(record, perceived=False, unnoticed=False, participants=())
        modality = "believed" if modality == "observed" else modality
    if record.said and other.holder is None:
        record = replace(record, said=False, participants=())
    participants = record.participants
    if participants and other.holder is not None:
        participants = tuple(dict.fromkeys((other.holder, *participants[1:])))
    return replace(
        record,
        holder=other.holder,
        about=None if record.perceived else other.about,
        deeper=() if record.perceived else other.deeper,
        key=other.key,
        modality=modality,
        evidence=() if record.perceived else evidence,
        participants=participants,
    )


@st.composite
def hidden_records(
    draw: st.DrawFn, asker: Asker, shared: tuple[Rec, ...], plan: Plan
) -> tuple[int, Rec]:
    """A record the asker may not see, written before shared record `at`; often in
    the chain of a shared record (before or after it, in time and in writing order).
    Numbered by `cases`."""
    at = 0 if plan.hidden_first else draw(st.integers(0, len(shared)))
    if plan.derivations and at and draw(st.integers(0, 2)):
        return at, draw(derivations(asker, shared, at))
    premises = st.builds(Ref, st.just("base"), st.integers(0, at - 1)) if at else None
    record = draw(records(0, _holders(asker), premises))
    if plan.hidden_first:
        record = replace(record, valid_at=TIMES[0])
    in_a_chain = draw(st.booleans())
    if shared and in_a_chain:
        record = _same_chain(record, draw(st.sampled_from(shared)))
    method = draw(st.sampled_from(plan.hide_by))
    uncleared = [s for s in SCOPES if not asker.cleared(s)]
    if method == "scope" and not uncleared:
        method = "audience" if "audience" in plan.hide_by else "tenant"
    if method == "audience":
        pool = [e for e in ENTRIES if not asker.admitted_by(e)]
        record = replace(record, audience=draw(audiences(pool)))
    elif method == "scope":
        record = replace(record, scope=draw(st.sampled_from(uncleared)))
    else:
        # Another tenant's record that names the asker: only the tenant wall hides it.
        audience = tuple(dict.fromkeys((asker.id, *record.audience)))[:3]
        record = replace(record, audience=audience, scope=None, derived_from=())
    return at, replace(record, hidden_by=method)


# --- requests ----------------------------------------------------------------------------

refs = st.builds(
    Ref,
    kind=st.sampled_from(("base", "hidden", "hidden", "mine", "missing")),
    index=st.integers(0, 4),
)
FILTER_KEYS = (
    "supersedes",
    "superseded_by",
    "provenance.writer",
    "provenance.derived_from",
    "invalid_at",
    "valid_at",
    "evidence[].by",
    "evidence[].kind",
    "evidence.by",
    "evidence.kind",
    "audience",
    "access_scope",
    "observer_id",
    "observed_id",
    "proposition.key",
    "proposition.value",
    "modality",
    "id",
    "source_id",
    "tenant",
)
LINK_KEYS = ("supersedes", "superseded_by", "provenance.derived_from", "id")
filter_keys = st.sampled_from((*FILTER_KEYS, *LINK_KEYS, *LINK_KEYS))
WORDS = (*ENTRIES, BUILDER, *SCOPES, *KEYS, *MODALITIES, *TIMES, "src-0", "src-1")
strings = st.one_of(refs, st.sampled_from(WORDS))
texts = st.one_of(
    st.builds(Frag, refs, st.integers(0, 5)),
    st.sampled_from(("alice", "bob", "k0", "s1", "team", "claim", "believes")),
)


def _match(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    value: st.SearchStrategy[Any]
    if kind == "value":
        value = st.one_of(strings, st.integers(0, 2))
    elif kind in ("any", "except"):
        value = st.lists(strings, min_size=1, max_size=3)
    else:
        value = texts
    return st.builds(lambda k, v: {"key": k, "match": {kind: v}}, filter_keys, value)


instants = st.sampled_from(AS_OF)
conditions: st.SearchStrategy[dict[str, Any]] = st.one_of(
    *(_match(kind) for kind in ("value", "value", "any", "except", "text", "text_any", "phrase")),
    st.builds(
        lambda k, lo, hi: {"key": k, "range": {"gte": lo, "lt": hi}},
        st.sampled_from(("confidence", "proposition.value")),
        st.sampled_from((0, 0.5)),
        st.sampled_from((1, 2, 3)),
    ),
    st.builds(
        lambda k, bound: {"key": k, "range": bound},
        st.sampled_from(("valid_at", "invalid_at", "evidence[].at")),
        st.one_of(
            st.builds(lambda t: {"gte": t}, instants),
            st.builds(lambda t: {"lt": t}, instants),
            st.builds(lambda a, b: {"gt": a, "lte": b}, instants, instants),
        ),
    ),
    st.builds(
        lambda k, n, op: {"key": k, "values_count": {op: n}},
        st.sampled_from(
            ("audience", "supersedes", "superseded_by", "provenance.derived_from", "evidence")
        ),
        st.integers(0, 2),
        st.sampled_from(("gte", "lt", "gt", "lte")),
    ),
    st.builds(lambda k: {"is_empty": {"key": k}}, filter_keys),
    st.builds(lambda k: {"is_null": {"key": k}}, filter_keys),
    st.builds(lambda ids: {"has_id": ids}, st.lists(refs, min_size=1, max_size=3)),
    st.builds(
        lambda k, v: {
            "nested": {"key": "evidence", "filter": {"must": [{"key": k, "match": {"value": v}}]}}
        },
        st.sampled_from(("by", "kind")),
        st.sampled_from((*PEOPLE, "acknowledgement", "document")),
    ),
)


def _clauses(inner: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    listed = st.lists(inner, min_size=1, max_size=2)
    return st.fixed_dictionaries(
        {},
        optional={
            "must": listed,
            "should": listed,
            "must_not": listed,
            "min_should": st.fixed_dictionaries(
                {
                    "conditions": st.lists(inner, min_size=1, max_size=3),
                    "min_count": st.integers(1, 2),
                }
            ),
        },
    )


# One condition on a field that names or dates other versions, with an id the asker
# might guess (a hidden one, often): where a hidden record would show first.
links = st.sampled_from(("supersedes", "superseded_by", "provenance.derived_from"))
named = st.builds(Ref, st.sampled_from(("hidden", "hidden", "base")), st.integers(0, 2))
link_conditions = st.one_of(
    st.builds(lambda k: {"is_empty": {"key": k}}, links | st.just("invalid_at")),
    st.builds(lambda k: {"is_null": {"key": k}}, links),
    st.builds(lambda k, v: {"key": k, "match": {"value": v}}, links, named),
    st.builds(lambda k, v: {"key": k, "match": {"any": [v]}}, links, named),
    st.builds(
        lambda k, kind, v: {"key": k, "match": {kind: v}},
        links,
        st.sampled_from(("text", "text_any", "phrase")),
        st.builds(Frag, named, st.integers(0, 5)),
    ),
    st.builds(lambda k, n: {"key": k, "values_count": {"gte": n}}, links, st.integers(1, 2)),
    st.builds(lambda t: {"key": "invalid_at", "range": {"lt": t}}, instants),
)
link_filters = st.builds(
    lambda clause, condition: {clause: [condition]},
    st.sampled_from(("must", "must", "must_not", "should")),
    link_conditions,
)
# Anything else; a condition may itself be a filter, one level deep.
any_filters = _clauses(st.one_of(conditions, conditions, conditions, _clauses(conditions)))
filters = st.one_of(st.none(), link_filters, link_filters, any_filters, any_filters)


def _chain_instant(record: Rec) -> tuple[Any, ...]:
    """Two versions of one chain dated alike in one write are ordered by their ids,
    which the sidecar may generate at random: a write holds at most one of them."""
    return (record.holder, record.about, record.key, record.valid_at)


@st.composite
def asker_record(draw: st.DrawFn, asker: Asker, seed: int, chains: tuple[Rec, ...]) -> Rec:
    """A record the asker writes: its own view (a relay: anyone's), into the chains
    the world uses, with client-chosen ids (a hidden record's, too), `supersedes`
    and `derived_from` naming any record, dated before or after the hidden ones."""
    holder = draw(people) if asker.id == RELAY or draw(st.integers(0, 9)) == 0 else asker.id
    modality = draw(st.sampled_from(("believed", "asserted", "reported_belief", "known")))
    evidence = (("acknowledgement", holder),) if modality == "known" else ()
    record = Rec(
        seed=seed,
        holder=holder,
        key=draw(keyed),
        value=draw(st.integers(0, 2)),
        modality=modality,
        audience=draw(audiences(ENTRIES)),
        valid_at=draw(times),
        id=draw(st.one_of(st.just("chosen"), st.just("chosen"), st.none(), refs)),
        scope=draw(scopes),
        evidence=evidence,
        derived_from=tuple(draw(st.lists(refs, max_size=1))),
        supersedes=draw(st.one_of(st.none(), st.none(), refs)),
    )
    # Often into a chain the world has (one the asker may hold: a relay holds any).
    mine = [c for c in chains if c.holder is not None and (asker.id == RELAY or c.holder == holder)]
    in_a_chain = draw(st.booleans())
    if mine and in_a_chain:
        record = _same_chain(record, draw(st.sampled_from(mine)))
    return record


# What a payload update sets: a new version (confidence, modality), a new line for
# other readers (audience, scope), or a refusal (an audience that is not a list).
payload_changes = st.one_of(
    st.builds(lambda c: {"confidence": c}, st.sampled_from((0.3, 0.9))),
    st.builds(lambda m: {"modality": m}, st.sampled_from(("believed", "asserted"))),
    st.builds(lambda a: {"audience": list(a)}, audiences(ENTRIES)),
    st.builds(lambda c: {"access_scope": c}, st.sampled_from(SCOPES)),
    st.just({"audience": "not a list of names" * 20}),
)

# A chain of minds after the observer (recall's and propositions' `observed`).
chains_of_minds = st.lists(people, min_size=1, max_size=4).map(tuple)

# Words of the records' indexed text (holder, date, "claim <seed> on <key> is <value>"),
# and one that is in none of them.
recall_queries = st.sampled_from(("claim on k0", "holds", "k1", "what does alice think of k0"))
SEARCH_MODES = ("hybrid", "dense", "lexical")
vector_seeds = st.one_of(st.integers(1, 20), st.integers(100, 105), st.integers(200, 203))
audience_lists = st.lists(st.sampled_from((*PEOPLE, RELAY, "group:team")), max_size=2, unique=True)


@st.composite
def ops(
    draw: st.DrawFn,
    asker: Asker,
    plan: Plan,
    chains: tuple[Rec, ...],
    premises: tuple[int, ...] = (),
) -> Op:
    """One request (the records it writes are numbered by `cases`). `premises`: shared
    records hidden ones derive from, which erasures name two times in three."""
    kind = draw(st.sampled_from(plan.op_kinds))
    erased = refs
    if premises:
        premise = st.sampled_from([Ref("base", i) for i in premises])
        erased = st.one_of(premise, premise, refs)
    args: dict[str, Any]
    if kind == "recall":
        # By words, by a vector of the caller's, or both; ranked by either or both
        # (`search`; an impossible pairing is refused alike by both stores).
        by = draw(st.sampled_from(("query", "query", "vector", "both")))
        args = {
            "query": None if by == "vector" else draw(recall_queries),
            "vector_seed": None if by == "query" else draw(vector_seeds),
            "search": draw(st.none() | st.sampled_from(SEARCH_MODES)),
            "audience": draw(audience_lists),
            "as_of": draw(st.none() | instants),
            "limit": draw(st.sampled_from((1, 2, 3, 10))),
            "about": draw(st.none() | st.sampled_from(KEYS)),
            "observer": draw(st.none() | st.just(asker.id) | people),
            "observed": draw(st.none() | people | chains_of_minds),
            "attitude": draw(st.none() | st.sampled_from(("believes", "knows"))),
            "speech_act": draw(st.none() | st.booleans()),
            "heard": draw(st.none() | st.booleans()),
            "source_id": draw(st.none() | st.sampled_from(("src-0", "src-1"))),
            "modality": draw(st.none() | st.sampled_from(MODALITIES)),
            "min_confidence": draw(st.none() | st.just(0.5)),
            "include_history": draw(st.booleans()),
        }
    elif kind == "propositions":
        args = {
            "key": draw(st.sampled_from((*KEYS, "k9"))),
            "audience": draw(audience_lists),
            "as_of": draw(st.none() | instants),
            "depth": draw(st.sampled_from((None, None, 2, 3, 4))),
            "observer": draw(st.none() | st.just(asker.id) | people),
            "observed": draw(st.none() | chains_of_minds),
        }
    elif kind == "get":
        args = {"ref": draw(refs), "as_of": draw(st.none() | instants)}
    elif kind in ("history", "point"):
        args = {"ref": draw(refs)}
    elif kind in ("query", "search"):
        args = {
            "vector_seed": draw(vector_seeds),
            "filter": draw(filters),
            "limit": draw(st.integers(1, 10)),
            "offset": draw(st.sampled_from((None, None, 1, 2))),
        }
        if kind == "query":
            args["score_threshold"] = draw(st.sampled_from((None, None, 0.0)))
    elif kind == "scroll":
        args = {"filter": draw(filters), "limit": draw(st.integers(1, 4))}
    elif kind == "count":
        args = {"filter": draw(filters), "exact": draw(st.booleans())}
    elif kind == "retrieve":
        args = {"refs": tuple(draw(st.lists(refs, min_size=1, max_size=4)))}
    elif kind in ("write", "upsert"):
        written = tuple(
            draw(
                st.lists(
                    asker_record(asker, 0, chains), min_size=1, max_size=3, unique_by=_chain_instant
                )
            )
        )
        args = {"records": written, "batch": len(written) > 1 or draw(st.booleans())}
        if kind == "upsert":
            args.pop("batch")
    elif kind == "erase":
        args = {"ref": draw(erased), "history": draw(st.booleans())}
    elif kind in ("delete", "set_payload"):
        by_filter = draw(st.integers(0, 3)) == 0
        named = erased if kind == "delete" else refs
        args = {
            "refs": None if by_filter else tuple(draw(st.lists(named, min_size=1, max_size=3))),
            "filter": draw(filters) if by_filter else None,
        }
        if kind == "set_payload":
            args["payload"] = draw(payload_changes)
    elif kind == "grant":
        args = {
            "reader": draw(st.sampled_from((*PEOPLE, "group:team", "group:guests"))),
            "categories": tuple(draw(category_sets)),
            "purpose": draw(st.sampled_from((None, None, "recall", "get"))),
        }
    elif kind == "revoke":
        # The n-th grant the asker gave in this example (one not given: a missing id).
        args = {"nth": draw(st.integers(0, 2))}
    elif kind == "grants":
        args = {}
    elif kind == "observe":
        args = draw(observations(asker))
    elif kind == "membership":
        # Joins and leaves of the asker's conversation (its own, or refused alike).
        change = st.tuples(people, st.sampled_from(("join", "leave")), times)
        args = {"changes": tuple(draw(st.lists(change, min_size=1, max_size=3)))}
    elif kind == "witness":
        witnesses = draw(st.lists(people, min_size=1, max_size=3, unique=True))
        args = {
            "seed": 0,
            "key": draw(st.sampled_from(KEYS)),
            "value": draw(st.integers(0, 2)),
            "witnessed_by": tuple(witnesses),
            "unnoticed": tuple(w for w in witnesses if draw(st.booleans()) and w != witnesses[0]),
            "at": draw(times),
            "readers": tuple(draw(st.lists(people, max_size=1))),
            "scope": draw(scopes),
            "announced": draw(st.booleans()),
        }
    elif kind == "forget_rule":
        args = {"rule": draw(forget_rules)}
    elif kind == "lift":
        args = {"rule": draw(st.integers(0, 1))}
    elif kind == "erasure":
        args = {"request": draw(content_requests)}
    else:  # mcp
        args = draw(mcp_calls(asker, erased))
    return Op(kind, args)


# What the asker forgets: words of the records' text (world.Rec.body: "claim {seed} on
# {key} is {value}"), a key, or a pattern, about themselves or (refused alike in both
# stores) someone else; and what they erase by content.
forget_rules = st.one_of(
    st.fixed_dictionaries(
        {"kind": st.just("value"), "value": st.sampled_from(("on k0 is 1", "on k1 is 0", "is 2"))}
    ),
    st.fixed_dictionaries({"kind": st.just("key"), "key": st.sampled_from(KEYS)}),
    st.fixed_dictionaries({"kind": st.just("pattern"), "pattern": st.just("on @# is #")}),
    st.fixed_dictionaries({"kind": st.just("value"), "value": st.just("claim"), "subject": people}),
)
content_requests = st.one_of(
    st.fixed_dictionaries({"kind": st.just("proposition"), "key": st.sampled_from((*KEYS, "k9"))}),
    st.fixed_dictionaries(
        {
            "kind": st.just("query"),
            "query": recall_queries,
            "min_score": st.sampled_from((0.0, 0.3, 0.6)),
            "max_records": st.sampled_from((1, 3, 100)),
        }
    ),
)


@st.composite
def observations(draw: st.DrawFn, asker: Asker) -> dict[str, Any]:
    speaker = draw(people) if asker.id == RELAY else asker.id
    about = st.none() | people | st.lists(people, min_size=2, max_size=3).map(tuple)
    claim = st.tuples(st.just(0), st.sampled_from(KEYS), st.integers(0, 2), about, st.booleans())
    # One claim per key: two versions of one chain dated alike in one write are
    # ordered by their ids, which the sidecar may generate at random.
    claims = tuple(draw(st.lists(claim, min_size=1, max_size=2, unique_by=lambda c: c[1])))
    # Participants omitted: the conversation's members at said_at (for a relay), else
    # the speaker alone; claims without keys: each its utterance's own line.
    listed = st.lists(people, max_size=2, unique=True).map(tuple)
    return {
        "speaker": speaker,
        "participants": draw(st.none() | listed | listed),
        "said_at": draw(times),
        "claims": claims,
        "scope": draw(scopes),
        "unkeyed": draw(st.booleans()),
    }


@st.composite
def mcp_calls(
    draw: st.DrawFn, asker: Asker, erased: st.SearchStrategy[Ref] = refs
) -> dict[str, Any]:
    """One MCP tool call: the tool and its arguments (refs resolved when sent)."""
    tool = draw(st.sampled_from(MCP_TOOLS))
    args: dict[str, Any] = {"tool": tool}
    if tool == "recall":
        args |= {
            "query": draw(recall_queries),
            "about": draw(st.none() | st.sampled_from(KEYS)),
            "as_of": draw(st.none() | instants),
            "audience": tuple(draw(audience_lists)),
            "limit": draw(st.sampled_from((1, 3, 10))),
            "observer": draw(st.none() | st.just(asker.id)),
            "observed": draw(st.none() | people | chains_of_minds),
            "speech_act": draw(st.none() | st.booleans()),
            "heard": draw(st.none() | st.booleans()),
        }
    elif tool == "get_memory":
        args |= {"ref": draw(refs), "as_of": draw(st.none() | instants)}
    elif tool == "history":
        args |= {"ref": draw(refs)}
    elif tool == "forget":
        args |= {"ref": draw(erased), "history": draw(st.booleans())}
    elif tool == "what_do_people_think":
        args |= {
            "key": draw(st.sampled_from((*KEYS, "k9"))),
            "audience": tuple(draw(audience_lists)),
            "depth": draw(st.sampled_from((1, 2, 4))),
            "observed": draw(st.none() | chains_of_minds),
        }
    else:  # remember
        args |= draw(observations(asker))
    return args


def _numbered_op(op: Op, n: int) -> Op:
    """Distinct seeds (vectors, texts, ids) for what request n writes."""
    if "records" in op.args:
        records = tuple(
            replace(r, seed=1000 + 10 * n + k) for k, r in enumerate(op.args["records"])
        )
        return Op(op.kind, op.args | {"records": records})
    if "claims" in op.args:
        claims = tuple((1000 + 10 * n + k, *c[1:]) for k, c in enumerate(op.args["claims"]))
        return Op(op.kind, op.args | {"claims": claims})
    if "seed" in op.args:
        return Op(op.kind, op.args | {"seed": 1000 + 10 * n})
    return op


category_sets = st.lists(st.sampled_from(CATEGORIES), min_size=1, max_size=2, unique=True)


@st.composite
def grant_draws(draw: st.DrawFn, asker: Asker) -> GrantDraw:
    """A subject's grant, often to the asker (or a group they may be in)."""
    readers = (asker.id, asker.id, *PEOPLE, "group:team", "group:guests")
    return GrantDraw(
        subject=draw(st.sampled_from(PEOPLE)),
        reader=draw(st.sampled_from(readers)),
        categories=tuple(draw(category_sets)),
        purpose=draw(st.sampled_from((None, None, "recall", "get"))),
        ends=draw(st.integers(0, 3)) == 0,
    )


def _unrevealed(asker: Asker, record: Rec, grants: tuple[GrantDraw, ...]) -> Rec:
    """The hidden record without the categories a grant in force would reveal it by
    (its hiding is the audience's or the scope's: a grant of its holder's to the
    asker of one of its categories would show it)."""
    if record.hidden_by != "audience":
        return record
    holder = record.holder or BUILDER
    revealing = {
        c
        for g in grants
        if not g.ends and g.subject == holder and asker.admitted_by(g.reader)
        for c in g.categories
    }
    return replace(record, categories=tuple(c for c in record.categories if c not in revealing))


@st.composite
def cases(draw: st.DrawFn, plan: Plan, with_hidden: bool = True) -> Case:
    """Lists throughout, so that shrinking can drop any record or request."""
    data = None
    if plan.policy_data:
        withhold = draw(st.lists(st.sampled_from(PREMISE_CHANGES), unique=True))
        # Erase half the time, and first (where shrinking goes): of the three, the one
        # whose cascade reaches furthest.
        on_derived = draw(st.sampled_from(("erase", *ON_DERIVED[::-1])))
        data = PolicyData(on_derived, tuple(withhold))
    asker = draw(askers)
    drawn = draw(
        st.lists(
            shared_records(asker, plan.derivations),
            min_size=plan.shared[0],
            max_size=plan.shared[1],
        )
    )
    shared = tuple(_earlier(r, 100 + i, i) for i, r in enumerate(drawn))
    hidden: tuple[tuple[int, Rec], ...] = ()
    if with_hidden:
        placed = draw(
            st.lists(
                hidden_records(asker, shared, plan),
                min_size=plan.hidden[0],
                max_size=plan.hidden[1],
            )
        )
        hidden = tuple((at, _earlier(r, 200 + j, at)) for j, (at, r) in enumerate(placed))
    premises = tuple(
        sorted({p.index for _, r in hidden for p in r.derived_from if p.kind == "base"})
    )
    if plan.derivations:
        # Most premises of hidden derivations are the asker's to erase.
        mine = [i for i in premises if draw(st.integers(0, 2))]
        shared = tuple(draw(owned(asker, r)) if i in mine else r for i, r in enumerate(shared))
    chains = (*shared, *(r for _, r in hidden))
    requests = draw(
        st.lists(
            ops(asker, plan, chains, premises if plan.derivations else ()),
            min_size=plan.ops[0],
            max_size=plan.ops[1],
        )
    )
    if plan.derivations and premises:
        # An erasure of a premise, by id (the ways in that answer with ids).
        ref = Ref("base", draw(st.sampled_from(premises)))
        erasure = (
            Op("erase", {"ref": ref, "history": False})
            if draw(st.booleans())
            else Op("mcp", {"tool": "forget", "ref": ref, "history": False})
        )
        requests.insert(draw(st.integers(0, len(requests))), erasure)
    numbered = tuple(_numbered_op(op, n) for n, op in enumerate(requests))
    if not plan.grants:
        return Case(asker, shared, hidden, numbered, data)
    grants = tuple(draw(st.lists(grant_draws(asker), max_size=3)))
    labels = st.lists(st.sampled_from(CATEGORIES), max_size=2, unique=True).map(tuple)
    shared = tuple(replace(r, categories=draw(labels)) for r in shared)
    # What the asker's own grant requests give counts too: alice's grant of her
    # appointments to group:team, which she is in, shows her own appointment whose
    # audience left her out.
    in_play = Case(asker, shared, (), numbered, data, grants).grants_in_play()
    hidden = tuple(
        (at, _unrevealed(asker, replace(r, categories=draw(labels)), in_play)) for at, r in hidden
    )
    return Case(asker, shared, hidden, numbered, data, grants)
