"""Version links (`supersedes`, `superseded_by`) name other records.

A link is shown only when the record it names may be shown too, under the same
asker and audience: otherwise it would hand out the id of a withheld version and
confirm that one exists, which a missing record never does.

Two ways to know: the version is part of this very answer (`links_within`: free,
what searches use, so a recall or a Qdrant query costs nothing extra), or the
sidecar asks (`decided_links`: the linked versions are fetched and decided in one
batch, purpose `get`; what by-id reads and history use, where following the chain
is the point).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from uuid import UUID

from sidecar.gate import Disclosure
from sidecar.store import Hit, Store

LINKS = ("supersedes", "superseded_by")


def links_within(hits: list[Hit], disclosed: Iterable[str]) -> list[Hit]:
    """`hits` keeping only links to versions this response discloses."""
    visible = set(disclosed)
    return [_linking_only(hit, visible) for hit in hits]


async def decided_links(
    store: Store, request: Disclosure, hits: list[Hit], disclosed: Iterable[str]
) -> list[Hit]:
    """`hits` keeping links to versions disclosed here or that `request`'s asker
    and audience may get; the others are decided in one batch."""
    visible = set(disclosed)
    named = {str(h.record[link]) for h in hits for link in LINKS if h.record.get(link)}
    unknown = sorted(named - visible)
    if unknown:
        found = await store.get(request.question.asker.tenant, [UUID(i) for i in unknown])
        ask = replace(request.question, purpose="get", as_of=None)
        async with request.follow_up(ask, "links") as disclosure:
            decisions = await disclosure.decide([h.record for h in found])
        visible |= {record_id for record_id, d in decisions.items() if d.allow}
    return links_within(hits, visible)


def _linking_only(hit: Hit, visible: set[str]) -> Hit:
    hidden = [link for link in LINKS if hit.record.get(link) and hit.record[link] not in visible]
    if not hidden:
        return hit
    return replace(hit, record={k: v for k, v in hit.record.items() if k not in hidden})
