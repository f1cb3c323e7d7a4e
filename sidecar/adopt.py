"""`whose adopt`: put whose in front of a collection already on the Qdrant server it
fronts (issue 37 item 5; docs/operations.md, "Adopting a collection already in Qdrant").

The source collection is read, never changed: its vector configuration becomes a stack
collection of the tenant (store/stacks.py, made through the collections policy as a
stack's own create would be), and its points are scrolled in bounded batches and written
through the normal write path (`Memory.upsert_points`, route `adopt`): each point's
vectors as they are, its id as its id, its payload as the document. The labeling policy
decides each point's readers, holder and source; the write policy decides the record.

A batch is all or nothing in the write path, so each is split first: the labeling policy
is asked about the whole batch (one call), and a point it leaves unlabeled is not
written (so never disclosed) but counted with its reasons; a point the write path would
refuse for what it holds (no text, a vector the layout does not have) is set aside the
same way. What the write policy still refuses comes back by index: the batch is written
again without those points. A point already adopted is written again as the same
version, which versions.py does not store twice, so a rerun over adopted points is
harmless; one the writer may not read (its audience leaves the writer out) cannot be
compared, and is left as it was adopted (the writer's own id is taken: `id_exists`).

Progress is saved after each batch (the scroll offset and the counts) in
`<data_dir>/adopt/<tenant>-<source>.json`: a run stopped (by `--max`, a failure, a
signal) goes on where it stopped; `restart` starts over.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx
from qdrant_client import AsyncQdrantClient
from qdrant_client.http import models as qm
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from sidecar.auth.identity import Identity
from sidecar.errors import WhoseError
from sidecar.policy.contract import LabelDecision
from sidecar.services import Services
from sidecar.store.layout import VectorLayout
from sidecar.store.stacks import PREFIX
from sidecar.writes.documents import labeling_question, to_write
from sidecar.writes.versions import WrittenPoint
from sidecar.writes.writer import MAX_BATCH, WriteRefused

# Points per batch unless asked (each batch: one scroll, one labeling call, one write).
BATCH = 256
# Example point ids kept per reason.
EXAMPLES = 3
FORMAT = 1


class AdoptFailed(Exception):
    """The run cannot go on; the message is the one line the command prints."""


# --- what a run counted ----------------------------------------------------------------


@dataclass
class Reasons:
    """Points set aside, per reason: how many, and a few of their ids."""

    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)
    points: int = 0

    def add(self, point: str, reasons: Sequence[Any]) -> None:
        self.points += 1
        for reason in dict.fromkeys(reason_text(r) for r in reasons or ["no_reason_given"]):
            self.counts[reason] = self.counts.get(reason, 0) + 1
            shown = self.examples.setdefault(reason, [])
            if len(shown) < EXAMPLES:
                shown.append(point)

    def as_json(self) -> dict[str, Any]:
        return {"points": self.points, "counts": self.counts, "examples": self.examples}

    @classmethod
    def from_json(cls, raw: Any) -> Reasons:
        raw = raw if isinstance(raw, dict) else {}
        counts = {str(k): int(v) for k, v in dict(raw.get("counts") or {}).items()}
        examples = {str(k): [str(i) for i in v] for k, v in dict(raw.get("examples") or {}).items()}
        return cls(counts, examples, int(raw.get("points") or 0))


@dataclass
class Tally:
    """What was seen and done: labeled points are written (or would be, in a dry run),
    `unchanged` of them already adopted as they are."""

    seen: int = 0
    labeled: int = 0
    written: int = 0
    unchanged: int = 0
    # Adopted before by the same writer, who may not read them (not in their audience):
    # not compared, left as they are (the writer's own id is taken: `id_exists`).
    kept: int = 0
    unlabeled: Reasons = field(default_factory=Reasons)
    refused: Reasons = field(default_factory=Reasons)

    def as_json(self) -> dict[str, Any]:
        return {
            "seen": self.seen,
            "labeled": self.labeled,
            "written": self.written,
            "unchanged": self.unchanged,
            "kept": self.kept,
            "unlabeled": self.unlabeled.as_json(),
            "refused": self.refused.as_json(),
        }

    @classmethod
    def from_json(cls, raw: Any) -> Tally:
        raw = raw if isinstance(raw, dict) else {}
        return cls(
            int(raw.get("seen") or 0),
            int(raw.get("labeled") or 0),
            int(raw.get("written") or 0),
            int(raw.get("unchanged") or 0),
            int(raw.get("kept") or 0),
            Reasons.from_json(raw.get("unlabeled")),
            Reasons.from_json(raw.get("refused")),
        )


def reason_text(reason: Any) -> str:
    """A reason as one short string (the write path's validation problems are objects)."""
    if isinstance(reason, str):
        return reason
    if isinstance(reason, Mapping):
        key = reason.get("metadata_key")
        where = ".".join(str(p) for p in reason.get("loc") or ())
        kind = reason.get("type") or reason.get("msg") or "invalid"
        named = f"metadata:{key}" if key else where
        return f"{kind}:{named}" if named else str(kind)
    return str(reason)


# --- where the run is ------------------------------------------------------------------


@dataclass
class Progress:
    """What the progress file keeps: the next scroll offset, and the counts so far."""

    tenant: str
    source: str
    target: str
    writer: str
    offset: int | str | None = None
    done: bool = False
    tally: Tally = field(default_factory=Tally)

    def as_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "tenant": self.tenant,
            "source": self.source,
            "target": self.target,
            "as": self.writer,
            "offset": self.offset,
            "done": self.done,
            "tally": self.tally.as_json(),
            "updated": datetime.now(UTC).isoformat(),
        }


def progress_path(data_dir: Path, tenant: str, source: str) -> Path:
    """`<data_dir>/adopt/<tenant>-<source>.json`, each name quoted to one file name."""
    return data_dir / "adopt" / f"{quote(tenant, safe='')}-{quote(source, safe='')}.json"


def load_progress(path: Path, fresh: Progress) -> Progress:
    """The progress saved at `path` for the same run (`fresh` if none); AdoptFailed for a
    file of another run or one that cannot be read."""
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        return fresh
    except (OSError, ValueError) as exc:
        raise AdoptFailed(
            f"cannot read the progress file {path}: {exc} (--restart to start over)"
        ) from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise AdoptFailed(f"{path} is not an adopt progress file (--restart to start over)")
    same = (raw.get("tenant"), raw.get("source"), raw.get("target"))
    if same != (fresh.tenant, fresh.source, fresh.target):
        raise AdoptFailed(
            f"{path} is the progress of adopting {raw.get('source')!r} into {raw.get('target')!r}"
            f", not {fresh.target!r}: finish that run, or --restart to start over"
        )
    offset = raw.get("offset")
    if not (offset is None or isinstance(offset, int | str)):
        raise AdoptFailed(f"{path}: its offset is not a point id (--restart to start over)")
    return Progress(
        fresh.tenant,
        fresh.source,
        fresh.target,
        fresh.writer,
        offset,
        bool(raw.get("done")),
        Tally.from_json(raw.get("tally")),
    )


def save_progress(path: Path, progress: Progress) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    written = path.with_suffix(".json.new")
    written.write_text(json.dumps(progress.as_json(), indent=1))
    os.replace(written, path)


# --- the source collection -------------------------------------------------------------


class Source:
    """The collection adopted, read only: its layout, its size, its points in pages."""

    def __init__(self, client: AsyncQdrantClient, name: str, where: str) -> None:
        self.client = client
        self.name = name
        self.where = where

    async def _call(self, call: Callable[[], Any]) -> Any:
        try:
            return await call()
        except UnexpectedResponse as exc:
            if exc.status_code == 404:
                raise AdoptFailed(
                    f"source collection {self.name!r} does not exist on {self.where}"
                ) from None
            if exc.status_code in (401, 403):
                raise AdoptFailed(
                    f"Qdrant at {self.where} refused the request ({exc.status_code}):"
                    " is WHOSE_QDRANT_API_KEY its key?"
                ) from None
            raise AdoptFailed(f"Qdrant at {self.where} answered {exc.status_code}") from None
        except (ResponseHandlingException, httpx.HTTPError, OSError) as exc:
            cause = exc.source if isinstance(exc, ResponseHandlingException) else exc
            raise AdoptFailed(
                f"Qdrant at {self.where} is unreachable: {cause or type(cause).__name__}"
            ) from None

    async def create_body(self) -> dict[str, Any]:
        """What a create-collection request for the same vectors would send."""
        info: qm.CollectionInfo = await self._call(lambda: self.client.get_collection(self.name))
        params = info.config.params
        body: dict[str, Any] = {}
        if params.vectors is not None:
            vectors = params.vectors
            if isinstance(vectors, qm.VectorParams):
                body["vectors"] = vectors.model_dump(mode="json", exclude_none=True)
            else:
                body["vectors"] = {
                    n: v.model_dump(mode="json", exclude_none=True) for n, v in vectors.items()
                }
        if params.sparse_vectors:
            body["sparse_vectors"] = {
                n: v.model_dump(mode="json", exclude_none=True)
                for n, v in params.sparse_vectors.items()
            }
        return body

    async def count(self) -> int:
        counted = await self._call(lambda: self.client.count(self.name, exact=True))
        return int(counted.count)

    async def page(
        self, offset: int | str | None, limit: int
    ) -> tuple[list[qm.Record], int | str | None]:
        records, following = await self._call(
            lambda: self.client.scroll(
                self.name, limit=limit, offset=offset, with_payload=True, with_vectors=True
            )
        )
        nxt = following if isinstance(following, int | str) else None
        return list(records), nxt


def point_vectors(vector: Any) -> dict[str, Any]:
    """A scrolled point's vectors by name, as the stack collection takes them: the
    unnamed dense one under "", sparse ones as SparseVector."""
    if vector is None:
        return {}
    if not isinstance(vector, dict):
        vector = {"": vector}
    named: dict[str, Any] = {}
    for name, value in vector.items():
        if isinstance(value, qm.SparseVector):
            named[name] = value
        elif isinstance(value, list) and all(isinstance(x, int | float) for x in value):
            named[name] = [float(x) for x in value]
        else:
            named[name] = value  # a multivector: the layout names the problem
    return named


def record_id(point: int | str | UUID) -> UUID:
    """The UUID a point id is kept as (http/qdrant/dialect.py `point_as_record_id`)."""
    if isinstance(point, UUID):
        return point
    return UUID(int=point) if isinstance(point, int) else UUID(point)


# --- the run ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    source: str
    target: str
    who: Identity
    batch: int = BATCH
    max_points: int | None = None
    dry_run: bool = False


Report = Callable[[int, int], None]  # (points seen by this run, points in this batch)


class Adoption:
    """One run of `whose adopt` over open services and the source collection."""

    def __init__(self, svc: Services, source: Source, plan: Plan) -> None:
        if not 1 <= plan.batch <= MAX_BATCH:
            raise AdoptFailed(f"--batch must be 1..{MAX_BATCH}")
        if plan.max_points is not None and plan.max_points < 1:
            raise AdoptFailed("--max must be at least 1")
        self.svc = svc
        self.source = source
        self.plan = plan
        self.layout: VectorLayout | None = None

    async def prepare(self) -> VectorLayout:
        """The target's layout, from the source's vectors: refused by name where whose
        cannot keep them; the target made (unless a dry run) or found with that layout."""
        plan = self.plan
        if plan.source == self.svc.settings.collection or plan.source.startswith(PREFIX):
            raise AdoptFailed(f"{plan.source!r} is whose's own collection, not a stack's")
        body = await self.source.create_body()
        try:
            layout = VectorLayout.from_create_body(body)
        except WhoseError as exc:
            raise AdoptFailed(
                f"source collection {plan.source!r} cannot be adopted: {exc}"
            ) from None
        existing = await self.svc.stacks.info(plan.who, plan.target)
        if existing is not None and existing.layout != layout:
            raise AdoptFailed(
                f"collection {plan.target!r} of tenant {plan.who.tenant} exists with other"
                f" vectors ({existing.layout.describe()}) than {plan.source!r}"
                f" ({layout.describe()}): adopt into another --collection"
            )
        if existing is None and not plan.dry_run:
            await self.svc.stacks.create(plan.who, plan.target, body)
        self.layout = layout
        return layout

    async def run(
        self, progress: Progress, save: Callable[[Progress], None], report: Report
    ) -> int:
        """Scroll from the saved offset to the end (or --max points), a batch at a time,
        saving after each (not in a dry run); the points seen by this run."""
        plan = self.plan
        seen = 0
        while not progress.done:
            room = (
                plan.batch if plan.max_points is None else min(plan.batch, plan.max_points - seen)
            )
            if room <= 0:
                break
            records, following = await self.source.page(progress.offset, room)
            if records:
                await self.batch(records, progress.tally)
            seen += len(records)
            progress.offset = following
            progress.done = following is None
            if not plan.dry_run:
                save(progress)
            report(seen, len(records))
        return seen

    async def batch(self, records: Sequence[qm.Record], tally: Tally) -> None:
        """Label the batch, set aside what cannot be written, write the rest."""
        plan, who = self.plan, self.plan.who
        assert self.layout is not None, "prepare() first"
        points = [
            (str(r.id), WrittenPoint(record_id(r.id), point_vectors(r.vector), r.payload or {}))
            for r in records
        ]
        tally.seen += len(points)
        questions = [labeling_question(p.payload) for _, p in points]
        asked = [q for q in questions if q is not None]
        answers = iter(await self.svc.policy.labels(who, asked, plan.target))
        writable: list[tuple[str, WrittenPoint]] = []
        for index, ((shown, point), question) in enumerate(zip(points, questions, strict=True)):
            decision: LabelDecision | None = next(answers) if question is not None else None
            if decision is not None and decision.labels is None:
                tally.unlabeled.add(shown, decision.reasons)
                continue
            problems = self._problems(index, point, decision)
            if problems:
                tally.refused.add(shown, problems)
                continue
            writable.append((shown, point))
        tally.labeled += len(writable)
        if plan.dry_run or not writable:
            return
        await self._write(writable, tally)

    def _problems(
        self, index: int, point: WrittenPoint, decision: LabelDecision | None
    ) -> list[Any]:
        """Why the write path would refuse the point for what it holds (none: writable)."""
        assert self.layout is not None
        vectors = point.vector if isinstance(point.vector, Mapping) else {"": point.vector}
        problems: list[Any] = [] if vectors else ["vector_required"]
        problems += self.layout.problems(vectors)
        try:
            to_write(index, point.id, point.payload, None, decision)
        except WriteRefused as refused:
            problems += [r for p in refused.problems for r in p.get("reasons") or ()]
        return problems

    async def _write(self, writable: list[tuple[str, WrittenPoint]], tally: Tally) -> None:
        """Write the points; those the write policy refuses are set aside and the rest
        written again (each retry has at least one point fewer)."""
        while writable:
            try:
                stored = await self.svc.memory.upsert_points(
                    self.plan.who,
                    [p for _, p in writable],
                    route="adopt",
                    collection=self.plan.target,
                )
            except WriteRefused as refused:
                named = {
                    p["index"]: p.get("reasons") or []
                    for p in refused.problems
                    if isinstance(p.get("index"), int) and p.get("reasons")
                }
                if not named:  # nothing to tell the refused from the rest: all set aside
                    named = {i: ["write_refused"] for i in range(len(writable))}
                for index, reasons in named.items():
                    if not 0 <= index < len(writable):
                        continue
                    if reasons == ["id_exists"]:
                        tally.kept += 1  # this writer's own earlier adoption of the id
                    else:
                        tally.labeled -= 1
                        tally.refused.add(writable[index][0], reasons)
                writable = [p for i, p in enumerate(writable) if i not in named]
                continue
            tally.written += len(stored.records)
            tally.unchanged += len(writable) - len(stored.records)
            return


def summary(plan: Plan, tally: Tally, this_run: int, progress: Progress, total: int | None) -> str:
    """The run's one summary line."""
    doing = "dry run" if plan.dry_run else "adopted"
    where = f"{plan.source!r} -> {plan.target!r} (tenant {plan.who.tenant}, as {plan.who.id})"
    if plan.dry_run:
        counts = f"{tally.labeled} would be labeled"
    else:
        counts = f"{tally.written} written, {tally.unchanged} unchanged"
        if tally.kept:
            counts += f", {tally.kept} adopted before and not readable by --as (left as they are)"
    counts += f", {tally.unlabeled.points} unlabeled, {tally.refused.points} refused"
    of = f" of {total}" if total is not None else ""
    state = "done" if progress.done else "stopped by --max: run again to go on"
    if plan.dry_run:
        state = "end of collection" if progress.done else f"stopped by --max after {this_run}"
    seen = f"{tally.seen}{of} points seen ({this_run} by this run)"
    return f"{doing} {where}: {seen}: {counts}; {state}"


def reasons_report(tally: Tally) -> list[str]:
    """A line per reason points were set aside, with a few example ids."""
    lines = []
    for kind, reasons in (("unlabeled", tally.unlabeled), ("refused", tally.refused)):
        for reason, count in sorted(reasons.counts.items(), key=lambda kv: (-kv[1], kv[0])):
            examples = ", ".join(reasons.examples.get(reason, []))
            lines.append(f"  {kind} {reason}: {count} (e.g. {examples})")
    return lines
