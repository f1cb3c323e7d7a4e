"""What the disclosure decision reads of a record, as OPA's compiled policy says.

Computed once per policy revision by the linked OPA library (native/linkedopa/readset.go:
an analysis of the compiled rules from the entrypoint through every rule, function,
package, `with`, `else` and comprehension, never of Rego text), and read here:

- `reads`: record paths the decision may depend on, each read whole; `*` is any
  element or key of what is above it (`evidence.*.kind`);
- `instants`: times the rules only parse and set against the instant asked about (or
  test for presence or readability): a shape holds their side of it, not their value;
- `compared`: every time set against the instant asked about, exact or not: the
  cache's bucket-boundary check covers each (policy/cache.py);
- `unbounded`: why no bound holds (the record passed whole to a builtin, a field read
  by a computed name, the id used other than as its decision's key): each record is
  then decided on its own;
- `uncacheable`: why no decision may be reused at all (one record's decision depends
  on others of the batch, the instant asked about is used in arithmetic, a builtin
  answers differently from call to call, the analysis met what it cannot follow):
  each batch is then decided as it is, and nothing is cached.

docs/design.md, "Deciding shapes", says what is shared on and why it is sound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Path = tuple[str, ...]
# Any element of a list, any key of an object.
STAR = "*"


class MalformedReadSet(ValueError):
    pass


@dataclass(frozen=True)
class ReadSet:
    reads: tuple[Path, ...]
    instants: tuple[Path, ...]
    compared: tuple[Path, ...]
    unbounded: tuple[str, ...] = ()
    uncacheable: tuple[str, ...] = ()

    @property
    def shares(self) -> bool:
        """Whether records alike in what is read may share one decision."""
        return not self.unbounded and not self.uncacheable and not self.overlapping

    @property
    def overlapping(self) -> tuple[str, ...]:
        """Instants that may name a value also read as it is (`meta.*` beside `meta.x`):
        a shape would hold that value by its side alone. The analysis keeps such a time
        exact; were it ever not to, records are decided alone rather than shared."""
        return tuple(
            f"the time {'.'.join(i)} is also read as it is at {'.'.join(r)}"
            for i in self.instants
            for r in self.reads
            if _overlap(i, r)
        )

    @property
    def caches(self) -> bool:
        """Whether a decision may be reused for another request at all."""
        return not self.uncacheable

    @staticmethod
    def parse(raw: Any) -> ReadSet:
        if not isinstance(raw, dict):
            raise MalformedReadSet("the read set is not an object")

        def paths(name: str) -> tuple[Path, ...]:
            listed = raw.get(name)
            if not isinstance(listed, list) or not all(
                isinstance(p, list) and p and all(isinstance(k, str) and k for k in p)
                for p in listed
            ):
                raise MalformedReadSet(f"the read set's {name} are malformed")
            return tuple(tuple(p) for p in listed)

        def reasons(name: str) -> tuple[str, ...]:
            listed = raw.get(name)
            if not isinstance(listed, list) or not all(isinstance(r, str) for r in listed):
                raise MalformedReadSet(f"the read set's {name} are malformed")
            return tuple(listed)

        return ReadSet(
            paths("reads"),
            paths("instants"),
            paths("compared"),
            reasons("unbounded"),
            reasons("uncacheable"),
        )

    def describe(self) -> str:
        """One line for the log: what decisions are shared on, or why they are not."""
        if self.uncacheable:
            return "not shared and not cached: " + "; ".join(self.uncacheable)
        if self.unbounded or self.overlapping:
            why = (*self.unbounded, *self.overlapping)
            return "each record decided alone (cached per record): " + "; ".join(why)
        exact = ", ".join(".".join(p) for p in self.reads) or "nothing"
        sided = ", ".join(".".join(p) for p in self.instants) or "none"
        return f"shared on {exact}; by their side of the instant asked about: {sided}"


def _overlap(a: Path, b: Path) -> bool:
    """Whether `a` and `b` may name one value, or one within the other: they agree on
    every key they both have, `*` matching any key."""
    return all(x == y or STAR in (x, y) for x, y in zip(a, b, strict=False))
