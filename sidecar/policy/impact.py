"""What a policy edit would change: the pure half of impact analysis. No I/O.

The replay (oversight.py, `Oversight.impact`) re-decides audited reads, one record
and one question at a time, under the policy in force and under a candidate; this
module says which of those pairs flipped and how, tallies them by rule, asker and
source, and builds the report. It also says how a record stood at the instant a read
asked about (`as_it_stood`), from the record as the store holds it now.

A flip is a (record, question) pair whose two decisions differ:

- `newly_disclosed`: withheld now, allowed by the candidate;
- `newly_withheld`: allowed now, withheld by the candidate;
- `changed_use`: allowed by both, but as another use (`usable_as`: the wording and
  modality the answer gets) or with other obligations.

Both withheld, for other reasons, is no flip: nothing the asker sees changes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sidecar.messages import (
    Flip,
    FlipCounts,
    FlipGroup,
    FlipKind,
    FlippedRecords,
    ImpactReport,
    ImpactSide,
    ImpactWindow,
    Skipped,
    Truncation,
)

__all__ = [
    "KINDS",
    "Flip",
    "FlipCounts",
    "FlipGroup",
    "FlipKind",
    "FlippedRecords",
    "ImpactReport",
    "ImpactSide",
    "ImpactWindow",
    "Question",
    "Skipped",
    "Tally",
    "Truncation",
    "as_it_stood",
    "differing_rules",
    "flip_kind",
    "report",
    "summary",
]

KINDS: tuple[FlipKind, ...] = ("newly_disclosed", "newly_withheld", "changed_use")


@dataclass(frozen=True)
class Question:
    """One audited question about one record: who asked (with their token's claims),
    who else heard, for what, and the instant asked about; `now` is when it was asked."""

    entry: str  # the audit entry's decision_id
    record_id: str
    asker: str
    groups: tuple[str, ...]
    roles: tuple[str, ...]
    scopes: tuple[str, ...]
    audience: tuple[str, ...]
    purpose: str
    now: datetime
    as_of: datetime
    # What the read decided then: allowed or not.
    audited_allow: bool
    # The digest of the grants the read passed to the policy (policy/grants.py
    # `digest`; None: it passed none), which the replay's rebuilt grants must match.
    grants_digest: str | None = None


def flip_kind(current: ImpactSide, candidate: ImpactSide) -> FlipKind | None:
    """How the candidate changes a pair's decision, if it does."""
    if current.allow != candidate.allow:
        return "newly_disclosed" if candidate.allow else "newly_withheld"
    if current.allow and (
        current.usable_as != candidate.usable_as or current.obligations != candidate.obligations
    ):
        return "changed_use"
    return None


def differing_rules(current: ImpactSide, candidate: ImpactSide) -> list[str]:
    """The rules whose reasons differ between the two sides (a rule only one side has
    counts, with no reasons on the other)."""
    before = {r.rule: sorted(r.reasons) for r in current.rules}
    after = {r.rule: sorted(r.reasons) for r in candidate.rules}
    return sorted(
        rule for rule in before.keys() | after.keys() if before.get(rule, []) != after.get(rule, [])
    )


@dataclass
class Tally:
    """The flips of a replay as they come, bounded in the examples it keeps."""

    max_examples: int
    decisions: int = 0
    drifted: int = 0
    counts: Counter[FlipKind] = field(default_factory=Counter)
    records: dict[FlipKind, set[str]] = field(default_factory=lambda: {k: set() for k in KINDS})
    by_rule: dict[str, Counter[FlipKind]] = field(default_factory=dict)
    by_asker: dict[str, Counter[FlipKind]] = field(default_factory=dict)
    by_source: dict[str, Counter[FlipKind]] = field(default_factory=dict)
    examples: list[Flip] = field(default_factory=list)

    def add(
        self,
        question: Question,
        source_id: str | None,
        current: ImpactSide,
        candidate: ImpactSide,
    ) -> Flip | None:
        """One pair decided under both policies; its flip, if it is one."""
        self.decisions += 1
        if current.allow != question.audited_allow:
            self.drifted += 1
        kind = flip_kind(current, candidate)
        if kind is None:
            return None
        rules = differing_rules(current, candidate)
        flip = Flip(
            kind=kind,
            record_id=question.record_id,
            source_id=source_id,
            asker=question.asker,
            audience=list(question.audience),
            purpose=question.purpose,
            as_of=question.as_of,
            entry=question.entry,
            rules=rules,
            current=current,
            candidate=candidate,
        )
        self.counts[kind] += 1
        self.records[kind].add(question.record_id)
        for rule in rules or ["(none)"]:
            self.by_rule.setdefault(rule, Counter())[kind] += 1
        self.by_asker.setdefault(question.asker, Counter())[kind] += 1
        self.by_source.setdefault(source_id or "(none)", Counter())[kind] += 1
        if len(self.examples) < self.max_examples:
            self.examples.append(flip)
        elif kind == "newly_disclosed":
            # A reviewer reads the disclosures first: one displaces a kept withholding.
            for i in range(len(self.examples) - 1, -1, -1):
                if self.examples[i].kind != "newly_disclosed":
                    self.examples[i] = flip
                    break
        return flip


def _counts(counter: Counter[FlipKind]) -> dict[str, int]:
    return {kind: counter[kind] for kind in KINDS}


def _groups(groups: Mapping[str, Counter[FlipKind]]) -> list[FlipGroup]:
    """Largest first: newly disclosed, then withheld, then changed uses; then by key."""
    ordered = sorted(
        groups.items(),
        key=lambda kv: (*(-kv[1][k] for k in KINDS), kv[0]),
    )
    return [FlipGroup(key=key, **_counts(counter)) for key, counter in ordered]


def report(
    tally: Tally,
    *,
    tenant: str,
    window: ImpactWindow,
    current_revision: str | None,
    candidate_revision: str | None,
    entries_read: int,
    seconds: float,
    truncated: Truncation | None,
    skipped: Skipped,
) -> ImpactReport:
    order = {kind: i for i, kind in enumerate(KINDS)}
    return ImpactReport(
        tenant=tenant,
        current_revision=current_revision,
        candidate_revision=candidate_revision,
        window=window,
        entries_read=entries_read,
        decisions=tally.decisions,
        seconds=round(seconds, 3),
        decisions_per_second=round(tally.decisions / seconds, 1) if seconds > 0 else 0.0,
        truncated=truncated,
        flips=FlipCounts(**_counts(tally.counts)),
        records=FlippedRecords(**{k: sorted(v) for k, v in tally.records.items()}),
        by_rule=_groups(tally.by_rule),
        by_asker=_groups(tally.by_asker),
        by_source=_groups(tally.by_source),
        examples=sorted(tally.examples, key=lambda f: (order[f.kind], f.record_id, f.entry)),
        skipped=skipped,
        drifted=tally.drifted,
    )


def as_it_stood(
    payload: Mapping[str, Any], at: datetime, recorded: Mapping[str, datetime]
) -> dict[str, Any]:
    """A stored record as it stood at `at`, from what the store holds now.

    A version is written once; what changes it later is its chain's doing: a successor
    closes it (`superseded_by`, `invalid_at`, recorded when the successor was:
    `recorded` maps a successor's id to its `recorded_at`), and a premise that changed
    marks it (`premise_changes`, each with its own `recorded_at`). Whatever of that
    happened after `at` is taken off. A version closed without a successor (withdrawn,
    or relinked by an erasure) is taken as it is now: the store keeps no date for that.
    """
    record = dict(payload)
    successor = record.get("superseded_by")
    if isinstance(successor, str) and successor in recorded and recorded[successor] > at:
        record.pop("superseded_by", None)
        record.pop("invalid_at", None)
    changes = record.get("premise_changes")
    if isinstance(changes, list):
        kept = [c for c in changes if not _after(c, at)]
        if kept:
            record["premise_changes"] = kept
        else:
            record.pop("premise_changes", None)
    return record


def _after(change: Any, at: datetime) -> bool:
    when = change.get("recorded_at") if isinstance(change, Mapping) else None
    if not isinstance(when, str):
        return False
    try:
        return datetime.fromisoformat(when.replace("Z", "+00:00")) > at
    except ValueError:
        return False


def flipped_pairs(flips: Iterable[Flip]) -> set[tuple[str, str]]:
    """(record id, audit entry) of each flip: what the exactness tests compare."""
    return {(f.record_id, f.entry) for f in flips}


def summary(built: ImpactReport, groups: int = 5) -> list[str]:
    """The report as a few lines for a terminal or a CI log (`whose policy impact`)."""
    flips = built.flips
    lines = [
        f"candidate {built.candidate_revision} against {built.current_revision} "
        f"(tenant {built.tenant}): {built.decisions} decisions replayed from "
        f"{built.entries_read} audit entries in {built.seconds:.2f} s "
        f"({built.decisions_per_second:.0f}/s)"
        + (f", stopped by {built.truncated}" if built.truncated else ""),
        f"newly disclosed: {flips.newly_disclosed}, newly withheld: {flips.newly_withheld}, "
        f"changed use: {flips.changed_use}; skipped: {built.skipped.erased} erased, "
        f"{built.skipped.not_stored} not stored, {built.skipped.grants_unknown} grants unknown",
    ]
    for title, found in (
        ("by rule", built.by_rule),
        ("by asker", built.by_asker),
        ("by source", built.by_source),
    ):
        for group in found[:groups]:
            lines.append(
                f"  {title} {group.key}: +{group.newly_disclosed} disclosed, "
                f"-{group.newly_withheld} withheld, ~{group.changed_use} changed"
            )
    for flip in built.examples:
        before = "allowed" if flip.current.allow else "withheld"
        after = "allowed" if flip.candidate.allow else "withheld"
        lines.append(
            f"  {flip.kind} {flip.record_id} to {flip.asker} (source {flip.source_id}, "
            f"{flip.purpose} as of {flip.as_of.isoformat()}): {before} "
            f"{flip.current.usable_as} {flip.current.reasons} -> {after} "
            f"{flip.candidate.usable_as} {flip.candidate.reasons} via {', '.join(flip.rules)}"
        )
    return lines
