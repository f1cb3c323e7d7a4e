"""A LangGraph `BaseStore` backed by whose: long-term memory that keeps whose it is.

    store = WhoseStore("http://127.0.0.1:8080", token=user_token, fields=["text"])
    graph = builder.compile(store=store)

**Namespaces.** `(tenant, holder, *path)`: the tenant of the store's identity (a
namespace naming another is refused), the person whose memory it is, then any path of
the application's (`("acme", "alice", "memories")`). An item `(namespace, key)` is one
record chain of whose: held by `holder` (`observer_id`), its proposition key
`holder/path.../key` (each part percent-encoded), told to the holder (and the store's
`audience`), `source_id` the store's (default `langgraph`), source channel `langgraph`.

**put** writes the holder's record through the write policy, as the store's identity:
putting into someone else's namespace is refused (WriteRefused, `writer_not_holder`)
unless the policy lets that identity relay for them. Putting a key again supersedes the
previous version (history kept: `WhoseClient.history`). The value is stored as JSON (the
record's `content`, at most 8 000 characters); the claim, worded in every answer, is the
text at the store's `fields` (LangGraph's paths: `"text"`, `"a.b"`, `"$"` the whole
value; `put(index=[...])` per item). All puts of a batch are one write: all or none.

**get** and **search** ask as the store's identity, and the policy decides every record:
search is recall (with a query) or the sidecar's listing (without), limited to the
holder and the store's records. Asking for another user's memory gives what the policy
lets you see: nothing, for a private memory (an abstention, never the record). Each
value comes back with `"whose"`: the attribution sentence, `usable_as`, obligations,
status, source and record id (a `"whose"` key in a value put is dropped: it is this
annotation, read back). `created_at` and `updated_at` are the version's `valid_at`.

**delete** erases every version of the item's chain you may see, oldest first
(DELETE /v1/memories/{id}, issue 25); a sidecar without the route answers 405, raised as
MethodNotAllowed. **list_namespaces** walks the store's records you may see.

Bounds: a search asks recall for at most `recall_limit` records (WHOSE_MAX_LIMIT, 100),
so `offset + limit` beyond it finds nothing more; a search below `(tenant, holder)`, or
with a `filter`, is narrowed on what recall returned. A listing (search without a query,
list_namespaces) looks at most `scan_limit` records. No TTL (`supports_ttl` is False).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Coroutine, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import quote, unquote
from uuid import UUID

import httpx
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    get_text_at_path,
    validate_op_namespace,
)

import sidecar.client.calls as calls
from sidecar.client.calls import Call, ScrollPage
from sidecar.client.clients import (
    DEFAULT_COLLECTION,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT,
    AsyncWhoseClient,
    DevIdentity,
    Retries,
    Token,
    WhoseClient,
)
from sidecar.errors import NotFound, WhoseError
from sidecar.messages import HistoryResponse, PropositionResponse, RecallRequest, RecallResponse
from sidecar.messages import Item as Disclosed
from sidecar.record import MemoryWrite, Modality

R = TypeVar("R")
# What a batch is, written once for both clients: a generator that yields the calls to
# send and is sent back their answers (or thrown their refusals), then returns results.
Steps = Generator[Call[Any], Any, R]

# The annotation every value comes back with, and the mark of the store's records.
ANNOTATION = "whose"
CHANNEL = "langgraph"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Options:
    """How the store writes and reads (see the module's docstring)."""

    source_id: str = "langgraph"
    fields: tuple[str, ...] = ("$",)
    modality: Modality = "believed"
    audience: tuple[str, ...] = ()
    recall_limit: int = 100
    scan_limit: int = 1000
    collection: str = DEFAULT_COLLECTION


# --- the mapping: namespaces and keys, records and items (pure) ----------------------


def memory_key(holder: str, path: Sequence[str], key: str) -> str:
    """The proposition key of an item: holder, path and key, each percent-encoded."""
    return "/".join(quote(part, safe="") for part in (holder, *path, key))


def parse_key(text: str) -> tuple[str, tuple[str, ...], str] | None:
    parts = [unquote(part) for part in text.split("/")]
    if len(parts) < 2 or not all(parts[:-1]):
        return None
    return parts[0], tuple(parts[1:-1]), parts[-1]


def _holder_of(namespace: tuple[str, ...], tenant: str) -> tuple[str, tuple[str, ...]]:
    """The holder and path of an item's namespace, checked against the tenant."""
    if len(namespace) < 2:
        raise InvalidNamespaceError(f"a whose namespace is (tenant, holder, ...): got {namespace}")
    _check_tenant(namespace, tenant)
    return namespace[1], namespace[2:]


def _check_tenant(prefix: tuple[str, ...], tenant: str) -> None:
    if prefix and prefix[0] not in (tenant, "*"):
        raise InvalidNamespaceError(
            f"namespace {prefix} names tenant {prefix[0]!r}; this store asks in {tenant!r}"
        )


def claim(value: Mapping[str, Any], fields: Sequence[str]) -> str:
    """The claim a value makes: the text at `fields`, else the whole value as JSON."""
    texts = [text for path in fields for text in get_text_at_path(value, path)]
    return " ".join(texts) if texts else get_text_at_path(value, "$")[0]


def record_of(op: PutOp, tenant: str, options: Options) -> MemoryWrite:
    """The holder's record for a put."""
    holder, path = _holder_of(op.namespace, tenant)
    assert op.value is not None
    value = {name: v for name, v in op.value.items() if name != ANNOTATION}
    fields = op.index if isinstance(op.index, list) else options.fields
    return MemoryWrite.model_validate(
        {
            "content": json.dumps(value, sort_keys=True, ensure_ascii=False),
            "proposition": {"text": claim(value, fields), "key": memory_key(holder, path, op.key)},
            "observer_id": holder,
            "source_id": options.source_id,
            "source": {"kind": "conversation", "speaker": holder, "channel": CHANNEL},
            "modality": options.modality,
            "audience": list(dict.fromkeys([holder, *options.audience])),
            "provenance": {"method": CHANNEL},
        }
    )


@dataclass(frozen=True)
class Found:
    """A disclosed record the store wrote, as LangGraph names it."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    at: datetime
    record_id: UUID
    score: float | None

    def item(self) -> Item:
        return Item(
            value=self.value,
            key=self.key,
            namespace=self.namespace,
            created_at=self.at,
            updated_at=self.at,
        )

    def search_item(self) -> SearchItem:
        return SearchItem(self.namespace, self.key, self.value, self.at, self.at, self.score)


def found(disclosed: Disclosed, tenant: str, options: Options) -> Found | None:
    """The LangGraph item a disclosed record is, if the store wrote it."""
    source = disclosed.source
    proposition = disclosed.proposition
    if (
        disclosed.source_id != options.source_id
        or source is None
        or source.channel != CHANNEL
        or proposition is None
        or proposition.key is None
    ):
        return None
    parsed = parse_key(proposition.key)
    if parsed is None or parsed[0] != disclosed.observer_id:
        return None
    holder, path, key = parsed
    try:
        value = json.loads(disclosed.as_written)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    value[ANNOTATION] = {
        "attribution": disclosed.attribution,
        "usable_as": disclosed.usable_as,
        "obligations": disclosed.obligations,
        "status": disclosed.status,
        "source_id": disclosed.source_id,
        "record_id": str(disclosed.id),
    }
    at = disclosed.valid_at or _EPOCH
    return Found((tenant, holder, *path), key, value, at, disclosed.id, disclosed.score)


def from_point(point: calls.ScrolledPoint) -> Disclosed | None:
    """A record the Qdrant dialect served, as the native API's item: its payload is the
    stored record with `content` the attribution and `whose` the decision."""
    payload = point.payload
    decided = payload.get("whose")
    if not isinstance(decided, dict):
        return None
    return Disclosed.model_validate(
        payload
        | {
            "id": point.id,
            "attribution": decided.get("attribution"),
            "usable_as": decided.get("usable_as"),
            "obligations": decided.get("obligations", []),
            "status": decided.get("status"),
        }
    )


def under(namespace: tuple[str, ...], prefix: tuple[str, ...]) -> bool:
    return len(namespace) >= len(prefix) and all(
        p in ("*", n) for n, p in zip(namespace, prefix, strict=False)
    )


def meets(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    if condition.match_type == "prefix":
        return under(namespace, tuple(condition.path))
    return under(tuple(reversed(namespace)), tuple(reversed(condition.path)))


def matches(value: Mapping[str, Any], wanted: Mapping[str, Any] | None) -> bool:
    """LangGraph's search filter over a value: equal values, nested objects, and the
    operators $eq, $ne, $gt, $gte, $lt, $lte."""
    return all(_holds(value.get(name), test) for name, test in (wanted or {}).items())


_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": lambda a, b: a == b,
    "$ne": lambda a, b: a != b,
    "$gt": lambda a, b: a is not None and float(a) > float(b),
    "$gte": lambda a, b: a is not None and float(a) >= float(b),
    "$lt": lambda a, b: a is not None and float(a) < float(b),
    "$lte": lambda a, b: a is not None and float(a) <= float(b),
}


def _holds(actual: Any, test: Any) -> bool:
    if isinstance(test, Mapping):
        if any(str(name).startswith("$") for name in test):
            unknown = set(test) - _OPERATORS.keys()
            if unknown:
                raise ValueError(f"unsupported filter operators: {sorted(unknown)}")
            return all(_OPERATORS[op](actual, operand) for op, operand in test.items())
        return isinstance(actual, Mapping) and matches(actual, test)
    return bool(actual == test)


# --- a batch, as steps (one definition for the sync and async stores) -----------------


def batch_steps(ops: Sequence[Op], tenant: str, options: Options) -> Steps[list[Result]]:
    """Reads first, in order, against what was stored before the batch; then every put
    of the batch as one write (the last put of a key wins, as in LangGraph's own
    stores); then deletes."""
    for op in ops:
        validate_op_namespace(op)
    results: list[Result] = []
    puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
    for op in ops:
        if isinstance(op, GetOp):
            current = yield from find_steps(op.namespace, op.key, tenant, options)
            results.append(None if current is None else current.item())
        elif isinstance(op, SearchOp):
            results.append((yield from search_steps(op, tenant, options)))
        elif isinstance(op, ListNamespacesOp):
            results.append((yield from list_steps(op, tenant, options)))
        elif isinstance(op, PutOp):
            puts[(op.namespace, op.key)] = op
            results.append(None)
        else:
            raise TypeError(f"unknown operation {type(op).__name__}")
    writes = [record_of(op, tenant, options) for op in puts.values() if op.value is not None]
    if writes:
        yield calls.remember(writes)
    for op in puts.values():
        if op.value is None:
            yield from delete_steps(op.namespace, op.key, tenant, options)
    return results


def find_steps(
    namespace: tuple[str, ...], key: str, tenant: str, options: Options
) -> Steps[Found | None]:
    """The current version of an item the asker may see (the newest, if the holder's
    memory of it is told to more than one audience)."""
    holder, path = _holder_of(namespace, tenant)
    answer: PropositionResponse = yield calls.views(memory_key(holder, path, key))
    shown = [answer.world_state] if answer.world_state else []
    candidates = [
        item
        for disclosed in [*shown, *answer.perspectives]
        if disclosed.status == "current"
        and (item := found(disclosed, tenant, options)) is not None
        and item.namespace == namespace
        and item.key == key
    ]
    return max(candidates, key=lambda item: (item.at, str(item.record_id)), default=None)


def search_steps(op: SearchOp, tenant: str, options: Options) -> Steps[list[SearchItem]]:
    prefix = tuple(op.namespace_prefix)
    _check_tenant(prefix, tenant)
    holder = prefix[1] if len(prefix) > 1 and prefix[1] != "*" else None
    wanted = op.offset + op.limit
    if op.query:
        exact = len(prefix) <= 2 and not op.filter and "*" not in prefix
        request = RecallRequest(
            query=op.query,
            observer=holder,
            source_id=options.source_id,
            limit=max(1, min(options.recall_limit, wanted if exact else options.recall_limit)),
        )
        answer: RecallResponse = yield calls.recall(request)
        shown = [found(disclosed, tenant, options) for disclosed in answer.items]
    else:
        shown = yield from listing_steps(holder, wanted, prefix, op.filter, tenant, options)
    kept = [
        item
        for item in shown
        if item is not None and under(item.namespace, prefix) and matches(item.value, op.filter)
    ]
    return [item.search_item() for item in kept[op.offset : wanted]]


def listing_steps(
    holder: str | None,
    wanted: int | None,
    prefix: tuple[str, ...],
    wanted_value: Mapping[str, Any] | None,
    tenant: str,
    options: Options,
) -> Steps[list[Found | None]]:
    """The store's records the asker may see, in id order, until `wanted` of them are
    under `prefix` and match (None: all), within `scan_limit` records."""
    match = {"source_id": options.source_id, "source.channel": CHANNEL}
    if holder is not None:
        match["observer_id"] = holder
    shown: list[Found | None] = []
    kept = scanned = 0
    after: UUID | None = None
    while scanned < options.scan_limit:
        size = min(options.recall_limit, options.scan_limit - scanned)
        page: ScrollPage = yield calls.scroll(options.collection, match, size, after)
        scanned += len(page.points)
        for point in page.points:
            disclosed = from_point(point)
            item = None if disclosed is None else found(disclosed, tenant, options)
            shown.append(item)
            if item and under(item.namespace, prefix) and matches(item.value, wanted_value):
                kept += 1
        if page.next is None or (wanted is not None and kept >= wanted):
            break
        after = page.next
    return shown


def list_steps(op: ListNamespacesOp, tenant: str, options: Options) -> Steps[list[tuple[str, ...]]]:
    conditions = list(op.match_conditions or ())
    holder = None
    for condition in conditions:
        if condition.match_type == "prefix":
            _check_tenant(tuple(condition.path), tenant)
            if len(condition.path) > 1 and condition.path[1] != "*":
                holder = condition.path[1]
    shown = yield from listing_steps(holder, None, (), None, tenant, options)
    namespaces = {
        item.namespace
        for item in shown
        if item is not None and all(meets(condition, item.namespace) for condition in conditions)
    }
    if op.max_depth is not None:
        namespaces = {namespace[: op.max_depth] for namespace in namespaces}
    return sorted(namespaces)[op.offset : op.offset + op.limit]


def delete_steps(
    namespace: tuple[str, ...], key: str, tenant: str, options: Options
) -> Steps[None]:
    """Erase every version of the item's chain the asker may see, oldest first: the
    current version goes last, so an erasure cut short leaves the item as it was."""
    current = yield from find_steps(namespace, key, tenant, options)
    if current is None:
        return
    chain: HistoryResponse = yield calls.history(current.record_id)
    for version in chain.items:
        # NotFound: erased with an earlier version of its chain.
        with contextlib.suppress(NotFound):
            yield calls.delete(version.id)


def run(steps: Steps[R], send: Callable[[Call[Any]], Any]) -> R:
    """Drive steps with a blocking `send`: answers are sent back into them, refusals
    of the error tree thrown into them (they may catch NotFound)."""
    answer: Any = None
    refused: WhoseError | None = None
    while True:
        try:
            call = steps.send(answer) if refused is None else steps.throw(refused)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        try:
            answer, refused = send(call), None
        except WhoseError as error:
            answer, refused = None, error


async def arun(steps: Steps[R], send: Callable[[Call[Any]], Coroutine[Any, Any, Any]]) -> R:
    """`run`, awaiting each answer."""
    answer: Any = None
    refused: WhoseError | None = None
    while True:
        try:
            call = steps.send(answer) if refused is None else steps.throw(refused)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        try:
            answer, refused = await send(call), None
        except WhoseError as error:
            answer, refused = None, error


class WhoseStore(BaseStore):
    """LangGraph's long-term memory store, backed by whose (see the module docstring)."""

    def __init__(
        self,
        base_url: str,
        *,
        token: Token | None = None,
        dev: DevIdentity | None = None,
        fields: Iterable[str] = ("$",),
        source_id: str = "langgraph",
        modality: Modality = "believed",
        audience: Iterable[str] = (),
        recall_limit: int = 100,
        scan_limit: int = 1000,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        retries: Retries = DEFAULT_RETRIES,
        collection: str = DEFAULT_COLLECTION,
    ) -> None:
        connection: dict[str, Any] = {
            "token": token,
            "dev": dev,
            "timeout": timeout,
            "retries": retries,
            "collection": collection,
        }
        self.client = WhoseClient(base_url, **connection)
        self.aclient = AsyncWhoseClient(base_url, **connection)
        self.options = Options(
            source_id=source_id,
            fields=tuple(fields),
            modality=modality,
            audience=tuple(audience),
            recall_limit=recall_limit,
            scan_limit=scan_limit,
            collection=collection,
        )

    def _tenant(self) -> str:
        tenant = self.client.tenant
        if tenant is None:
            raise InvalidNamespaceError("the store's identity names no tenant (a `tenant` claim)")
        return tenant

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return run(batch_steps(list(ops), self._tenant(), self.options), self.client.send)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        steps = batch_steps(list(ops), self._tenant(), self.options)
        return await arun(steps, self.aclient.send)

    def close(self) -> None:
        self.client.close()

    async def aclose(self) -> None:
        await self.aclient.aclose()
