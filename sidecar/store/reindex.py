"""`whose reindex`: a store re-embedded for another model, resumably.

Every record is copied, payload unchanged, into a new collection made for the
configured embedder (its dense vector embedded anew from what is indexed for the
record, its lexical vector with it), a page at a time in point-id order; after each
page the next page's offset is recorded beside the new collection, so a reindex that
stops (killed, the endpoint down) goes on from there when run again. When every page
is copied, the new collection takes the old one's place:

- embedded: the old shard folder is kept as `<collection>.before-reindex`, the new one
  is renamed to `<collection>`;
- server: the collection name becomes an alias of the new collection (moved in one
  step when it already is an alias; a collection of that name is deleted first, once
  the new one holds as many points).

Run it with the sidecars stopped (writes during a reindex would miss the new
collection); then start them with the new embedder configured.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import qdrant_edge as qe
from qdrant_client import AsyncQdrantClient
from qdrant_client import models as qm

from sidecar.embed import Embedder
from sidecar.embed.indexed import indexed_text
from sidecar.store import Store
from sidecar.store.edge import EdgeStore, claim, load_shard
from sidecar.store.server import Layout, ServerStore
from sidecar.store.vectors import DENSE, IndexSpec

log = logging.getLogger(__name__)

PROGRESS = "whose_reindex"
# Payload fields a store no longer writes, left behind by the version that first stored
# lexical vectors (each point's terms, for document frequencies): not copied.
RETIRED_FIELDS = ["_lexical_terms"]
Report = Callable[[str], None]


async def copy_pages(
    pages: Callable[[str | None], Any],
    target: Store,
    embedder: Embedder,
    offset: str | None,
    save: Callable[[str | None], Any],
    report: Report,
) -> int:
    """Every page from `offset` on, re-embedded into `target`; `save` records where the
    next page starts (None: done). Returns the records copied by this run."""
    copied = 0
    while True:
        payloads, next_offset = await pages(offset)
        by_tenant: dict[str, list[dict[str, Any]]] = {}
        for payload in payloads:
            if isinstance(payload, dict) and payload.get("tenant") and payload.get("id"):
                by_tenant.setdefault(str(payload["tenant"]), []).append(payload)
        for tenant, records in by_tenant.items():
            texts = [indexed_text(p) for p in records]
            vectors = await embedder.embed_batch(texts, "document")
            await target.put(
                tenant, [(r, {DENSE: v}) for r, v in zip(records, vectors, strict=True)]
            )
            copied += len(records)
        await save(next_offset)
        report(f"copied {copied} records")
        if next_offset is None:
            return copied
        offset = next_offset


async def reindex_edge(
    path: Path, embedder: Embedder, index: IndexSpec, page: int, report: Report
) -> int:
    """The embedded store at `path`, re-embedded (see the module's docstring)."""
    if not (path / "edge_config.json").exists():
        raise ValueError(f"no store at {path}")
    target_path = path.with_name(path.name + ".reindex")
    progress = target_path / f"{PROGRESS}.json"
    offset = None
    if progress.exists():
        offset = json.loads(progress.read_text()).get("next_offset")
        report(f"resuming into {target_path}")
    held = claim(path)
    try:
        source = load_shard(path)
    except BaseException:
        os.close(held)
        raise
    target = EdgeStore(target_path, index.dim, index=index)
    try:
        await target.open()
    except BaseException:
        source.close()
        os.close(held)
        raise
    try:

        async def pages(at: str | None) -> tuple[list[Any], str | None]:
            request = qe.ScrollRequest(offset=at, limit=page, with_payload=True, with_vector=False)
            found, following = source.scroll(request)
            return [r.payload for r in found], None if following is None else str(following)

        async def save(next_offset: str | None) -> None:
            progress.write_text(json.dumps({"next_offset": next_offset}))

        copied = await copy_pages(pages, target, embedder, offset, save, report)
    finally:
        await target.close()
        source.close()
        os.close(held)
    kept = _put_in_place(path, target_path, progress)
    report(f"{path} now holds vectors of {index.describe()}; the old store is in {kept}")
    return copied


def _put_in_place(path: Path, target: Path, progress: Path) -> Path:
    """The new shard folder at `path`; the old one kept beside it (returned)."""
    kept = path.with_name(path.name + ".before-reindex")
    if kept.exists():
        shutil.rmtree(kept)
    path.rename(kept)
    progress.unlink()
    target.rename(path)
    return kept


async def reindex_server(
    urls: list[str],
    collection: str,
    embedder: Embedder,
    index: IndexSpec,
    page: int,
    report: Report,
    *,
    api_key: str | None = None,
    layout: Layout | None = None,
) -> int:
    """The server collection (or alias) `collection`, re-embedded (see above)."""
    client = AsyncQdrantClient(url=urls[0], api_key=api_key, check_compatibility=False)
    try:
        aliases = {a.alias_name: a.collection_name for a in (await client.get_aliases()).aliases}
        source = aliases.get(collection, collection)
        digest = hashlib.sha256(json.dumps(index.as_json()).encode()).hexdigest()[:10]
        target_name = f"{collection}-{digest}"
        if source == target_name:
            raise ValueError(f"{collection} already holds vectors of {index.describe()}")
        target = ServerStore.connect(
            urls, target_name, index.dim, api_key=api_key, layout=layout, index=index
        )
        await target.open()
        info = await client.get_collection(target_name)
        offset = ((info.config.metadata or {}).get(PROGRESS) or {}).get("next_offset")
        if offset is not None:
            report(f"resuming into {target_name}")
        try:

            async def pages(at: str | None) -> tuple[list[Any], str | None]:
                found, following = await client.scroll(
                    source,
                    limit=page,
                    offset=at,
                    with_payload=qm.PayloadSelectorExclude(exclude=RETIRED_FIELDS),
                    with_vectors=False,
                )
                return [r.payload for r in found], None if following is None else str(following)

            async def save(next_offset: str | None) -> None:
                progress = {PROGRESS: {"from": source, "next_offset": next_offset}}
                await client.update_collection(target_name, metadata=progress)

            copied = await copy_pages(pages, target, embedder, offset, save, report)
        finally:
            await target.close()
        await _swap(client, collection, source, target_name, aliases)
        report(f"{collection} now names {target_name}: vectors of {index.describe()}")
        return copied
    finally:
        await client.close()


async def _swap(
    client: AsyncQdrantClient,
    collection: str,
    source: str,
    target: str,
    aliases: dict[str, str],
) -> None:
    moves: list[qm.AliasOperations] = []
    if collection in aliases:
        moves.append(qm.DeleteAliasOperation(delete_alias=qm.DeleteAlias(alias_name=collection)))
    else:
        old = (await client.count(source, exact=True)).count
        new = (await client.count(target, exact=True)).count
        if new < old:
            raise ValueError(f"{target} holds {new} points, {source} {old}: not replacing it")
        await client.delete_collection(source)
    create = qm.CreateAlias(collection_name=target, alias_name=collection)
    moves.append(qm.CreateAliasOperation(create_alias=create))
    await client.update_collection_aliases(change_aliases_operations=moves)
