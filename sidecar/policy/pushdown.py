"""Policy pushdown: the store filter, derived from the Rego policy by partial evaluation.

For each audience member, OPA's Compile API evaluates `whose.lib.visibility.visible_to`
with the record unknown and answers with what is left: a disjunction of
conjunctions of comparisons on `input.record` ("tenant is acme and the audience
holds bob and the record has no scope", or ...). This module reads that residue
into the store's terms: per member, the audience entries that admit them, and the
scopes their records may carry.

The filter may only ever be wider than the policy, never narrower, and it never
replaces the policy: every candidate is still decided by `whose.disclosure`. So a
comparison this module cannot read is dropped from its conjunction (which widens
it), and a residue it cannot read at all (support rules, an error from OPA's
compiler) gives no pushdown: recall then over-fetches on the tenant alone.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, replace
from typing import Any

import orjson
from cachetools import LRUCache

from sidecar import metrics
from sidecar.policy.contract import DisclosureQuestion
from sidecar.policy.engine import PolicyEngine
from sidecar.policy.engine import Untranslatable as Untranslatable
from sidecar.store.scope import Granted, Scope

log = logging.getLogger(__name__)

# Partially evaluated once per audience member, with input.record unknown.
COMPILE_QUERY = "data.whose.lib.visibility.visible_to(input.record, input.member)"
UNKNOWNS = ["input.record"]
_RECORD = ("input", "record")


@dataclass(frozen=True)
class Visible:
    """What one member's records look like. None means "not constrained here"."""

    # Audience entries of which a visible record holds at least one; () = nothing visible.
    audience: frozenset[str] | None
    # Scopes a visible record may carry (records with no scope are always admitted).
    scopes: frozenset[str] | None


NOTHING = Visible(frozenset(), frozenset())


def visible(result: Any, tenant: str) -> Visible:
    """Read one member's Compile API result (`{"queries": [...], "support": [...]}`)."""
    if not isinstance(result, dict):
        raise Untranslatable("no result")
    if result.get("support"):
        raise Untranslatable("support rules")
    queries = result.get("queries")
    if queries is None:
        return NOTHING  # no way for the rule to hold: this member sees nothing
    if not isinstance(queries, list):
        raise Untranslatable("queries is not a list")
    conjunctions = [c for q in queries if (c := _conjunction(q, tenant)) is not None]
    if not conjunctions:
        return NOTHING
    audiences = [c.audience for c in conjunctions]
    scopes = [c.scopes for c in conjunctions]
    return Visible(
        audience=None if None in audiences else frozenset().union(*audiences),  # type: ignore[arg-type]
        scopes=None if None in scopes else frozenset().union(*scopes),  # type: ignore[arg-type]
    )


@dataclass(frozen=True)
class Pushdown:
    """What every disclosable record meets, for the store to filter on (see policy/pushdown.py).

    Per constrained audience member, the audience entries that admit them; the scopes
    every member holds (None: not constrained). Empty: no narrowing at all.
    `derived`: made from the policy (else pushdown is off or fell back, and a search
    returns records the asker may not see, for the policy to withhold).
    """

    audience_any_of: tuple[tuple[str, ...], ...] = ()
    scopes: tuple[str, ...] | None = None
    derived: bool = False
    # Beside each member's audience entries, the grants that may reach them (Scope).
    granted: tuple[tuple[Granted, ...], ...] = ()

    def narrow(self, scope: Scope) -> Scope:
        return replace(
            scope, audience_any_of=self.audience_any_of, scopes=self.scopes, granted=self.granted
        )

    def describe(self) -> dict[str, Any]:
        described: dict[str, Any] = {"audience_any_of": self.audience_any_of, "scopes": self.scopes}
        if any(self.granted):
            described["granted"] = [
                [{"subject": g.subject, "categories": list(g.categories)} for g in grants]
                for grants in self.granted
            ]
        return described


class Compiler:
    """Each audience member's filter, compiled by OPA and reused under the same
    policy revision (keyed by revision and member)."""

    def __init__(self, policy: PolicyEngine, enabled: bool = True, size: int = 10_000) -> None:
        self.policy = policy
        self.enabled = enabled
        self.compiled: LRUCache[bytes, Visible] = LRUCache(maxsize=size)

    async def pushdown(
        self, question: DisclosureQuestion, revision: str | None
    ) -> tuple[Pushdown, str | None]:
        """The store filter for a question, and the revision its member filters were
        compiled (or reused) under; None when none was known (nothing was reused).

        A reused filter can only be stale after a policy change, and then only until
        the request's first decision reports the new revision (the gate then calls
        `forget`): a stale filter may hide a record for one request, it cannot
        disclose one.
        """
        if not self.enabled:
            metrics.PUSHDOWN.labels("off").inc()
            return Pushdown(), None
        asker = question.asker
        members = [asker.policy_view()] + [
            {"id": m, "tenant": asker.tenant}
            for m in dict.fromkeys(question.audience)
            if m != asker.id
        ]
        try:
            seen = await self._visible(members, revision)
        except Untranslatable as exc:
            # Over-fetch on the tenant alone: slower, never less checked.
            log.warning("no pushdown: %s", exc)
            metrics.PUSHDOWN.labels("fallback").inc()
            return Pushdown(), None
        metrics.PUSHDOWN.labels("compiled").inc()
        scopes = [v.scopes for v in seen if v.scopes is not None]
        constrained = [(v, m) for v, m in zip(seen, members, strict=True) if v.audience is not None]
        pushed = Pushdown(
            audience_any_of=tuple(tuple(sorted(v.audience or ())) for v, _ in constrained),
            scopes=tuple(sorted(frozenset.intersection(*scopes))) if scopes else None,
            derived=True,
            granted=tuple(_granted(question, m["id"]) for _, m in constrained),
        )
        return pushed, revision

    def forget(self) -> None:
        """The policy changed since the filters were compiled: compile afresh."""
        self.compiled.clear()

    async def _visible(self, members: list[dict[str, Any]], revision: str | None) -> list[Visible]:
        """Each member's filter: those kept under `revision` at once, the others
        compiled at the same time (a task each only then: a recall's members are
        usually all kept, and a task costs the loop a turn)."""
        keys = [orjson.dumps([revision, m], option=orjson.OPT_SORT_KEYS) for m in members]
        found: dict[int, Visible] = {}
        if revision is not None:
            found = {i: v for i, k in enumerate(keys) if (v := self.compiled.get(k)) is not None}
        missing = [i for i in range(len(members)) if i not in found]
        if missing:
            compiled = await asyncio.gather(*(self._compile(members[i]) for i in missing))
            for i, seen in zip(missing, compiled, strict=True):
                found[i] = seen
                if revision is not None:
                    self.compiled[keys[i]] = seen
        return [found[i] for i in range(len(members))]

    async def _compile(self, member: dict[str, Any]) -> Visible:
        result = await self.policy.compile(COMPILE_QUERY, {"member": member}, UNKNOWNS)
        return visible(result, member["tenant"])


def _granted(question: DisclosureQuestion, member: str) -> tuple[Granted, ...]:
    """The question's grants (already those in force for its purpose) that may reach
    the member: to them by name, or to a group (whose members only the policy knows,
    so the filter is wider than the policy there, never narrower)."""
    return tuple(
        Granted(str(g["subject"]), tuple(g["categories"]))
        for g in question.grants
        if g["reader"] == member or str(g["reader"]).startswith("group:")
    )


@dataclass
class _Conjunction:
    audience: frozenset[str] | None = None
    scopes: frozenset[str] | None = None


def _conjunction(query: Any, tenant: str) -> _Conjunction | None:
    """One conjunction's audience and scope requirements, or None if it cannot hold."""
    if not isinstance(query, list):
        raise Untranslatable("a query is not a list of expressions")
    found = _Conjunction()
    for expression in query:
        atom = _atom(expression)
        if atom is None:
            continue  # unreadable: dropping a conjunct only widens the filter
        kind, field, values = atom
        if field == "tenant" and kind == "in":
            if tenant not in values:
                return None
        elif field == "audience" and kind == "holds":
            found.audience = values if found.audience is None else found.audience | values
        elif field == "access_scope" and kind == "in":
            found.scopes = values if found.scopes is None else found.scopes & values
        elif field == "access_scope" and kind == "absent":
            found.scopes = frozenset() if found.scopes is None else found.scopes
    if found.audience is not None and not found.audience:
        return None
    return found


# An atom: ("in", field, values) the field is one of values; ("holds", field, values)
# the list field holds one of values; ("absent", field, ∅).
Atom = tuple[str, str, frozenset[str]]


def _atom(expression: Any) -> Atom | None:
    if not isinstance(expression, dict):
        raise Untranslatable("an expression is not an object")
    terms = expression.get("terms")
    if expression.get("negated"):
        field = _field(terms)
        return ("absent", field, frozenset()) if field else None
    if not isinstance(terms, list) or not terms:
        return None
    operator, args = _operator(terms[0]), terms[1:]
    if operator == "eq" and len(args) == 2:
        for a, b in (args, args[::-1]):
            if (field := _field(a)) and (value := _constant(a=b)) is not None:
                return ("in", field, frozenset({value}))
    if operator == "internal.member_2" and len(args) == 2:
        member, collection = args
        if (field := _field(collection)) and (value := _constant(a=member)) is not None:
            return ("holds", field, frozenset({value}))
        if (field := _field(member)) and (values := _constants(collection)) is not None:
            return ("in", field, values)
        # trim_prefix(<list field>[_], prefix) in [names]: the list holds prefix + a name.
        prefixed = _trim_prefix_call(member)
        if prefixed and (values := _constants(collection)) is not None:
            return ("holds", prefixed[0], frozenset(prefixed[1] + v for v in values))
    if operator == "trim_prefix" and len(args) == 3:
        # trim_prefix(<list field>[_], prefix, name): the list holds prefix + name.
        element = _element_field(args[0])
        prefix, name = _constant(a=args[1]), _constant(a=args[2])
        if element and prefix is not None and name is not None:
            return ("holds", element, frozenset({prefix + name}))
    return None  # startswith(...) and the like: implied by a sibling atom, or dropped


def _operator(term: Any) -> str | None:
    if isinstance(term, dict) and term.get("type") == "ref":
        parts = [p.get("value") for p in term["value"]]
        if all(isinstance(p, str) for p in parts):
            return ".".join(parts)
    return None


def _path(term: Any) -> list[tuple[str, Any]] | None:
    if isinstance(term, dict) and term.get("type") == "ref" and isinstance(term["value"], list):
        return [(p.get("type"), p.get("value")) for p in term["value"]]
    return None


def _field(term: Any) -> str | None:
    """`input.record.<a>.<b>` as "a.b"; None for anything else."""
    path = _path(term)
    if not path or len(path) < 3 or (path[0][1], path[1][1]) != _RECORD:
        return None
    if path[0][0] != "var" or any(kind != "string" for kind, _ in path[1:]):
        return None
    return ".".join(str(value) for _, value in path[2:])


def _element_field(term: Any) -> str | None:
    """`input.record.<field>[<var>]` (an element of a list field) as "field"."""
    path = _path(term)
    if not path or len(path) < 4 or path[-1][0] != "var":
        return None
    return _field({"type": "ref", "value": [{"type": k, "value": v} for k, v in path[:-1]]})


def _trim_prefix_call(term: Any) -> tuple[str, str] | None:
    if not (isinstance(term, dict) and term.get("type") == "call"):
        return None
    operator, *args = term["value"]
    if _operator(operator) != "trim_prefix" or len(args) != 2:
        return None
    element, prefix = _element_field(args[0]), _constant(a=args[1])
    return (element, prefix) if element and prefix is not None else None


def _constant(*, a: Any) -> str | None:
    if isinstance(a, dict) and a.get("type") == "string" and isinstance(a.get("value"), str):
        return str(a["value"])
    return None


def _constants(term: Any) -> frozenset[str] | None:
    if not (isinstance(term, dict) and term.get("type") in ("array", "set")):
        return None
    values = [_constant(a=t) for t in term.get("value") or []]
    if any(v is None for v in values):
        return None
    return frozenset(v for v in values if v is not None)
