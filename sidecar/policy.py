"""The policy client: asks OPA about a whole candidate batch in one HTTP call.

Rego owns every decision; this module only builds the input, posts it, and
reads the answer. Anything other than a well-formed answer (OPA down, slow,
erroring, or returning the wrong shape) raises PolicyUnavailable, and callers
disclose nothing: fail closed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal, TypeVar

import aiohttp
import orjson
from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError

from sidecar import metrics
from sidecar.identity import Identity
from sidecar.pushdown import Untranslatable
from sidecar.store import Scope, iso

DISCLOSURE_RULE = "whose/disclosure/decisions"
INGEST_RULE = "whose/ingest/decisions"
EXPLAIN_RULE = "whose/disclosure/explanation"

# The claim itself stays out of the policy input: the free text and the bare value
# (`proposition.text`, `proposition.value`) are what a policy guards, not what it
# decides on, and the input is logged by OPA and shown by explain. Everything else
# about a record is there, so new rules need no Python change.
_NOT_FOR_POLICY = ("content",)
_PROPOSITION_FOR_POLICY = ("key",)


class PolicyUnavailable(Exception):
    reason = "policy_unavailable"


UsableAs = Literal[
    "fact", "unverified_claim", "knowledge", "common_knowledge", "nested_belief", "belief", "none"
]


class Decision(BaseModel):
    """What the disclosure policy says about one record."""

    model_config = ConfigDict(extra="ignore")

    allow: StrictBool
    # A value we do not know how to present is a malformed answer: fail closed.
    usable_as: UsableAs
    obligations: list[str] = Field(default_factory=list)
    reasons: list[str] = Field(default_factory=list)


@dataclass(frozen=True)
class Pushdown:
    """What every disclosable record meets, for the store to filter on (see pushdown.py).

    Per constrained audience member, the audience entries that admit them; the scopes
    every member holds (None: not constrained). Empty: no narrowing at all.
    """

    audience_any_of: tuple[tuple[str, ...], ...] = ()
    scopes: tuple[str, ...] | None = None

    def narrow(self, scope: Scope) -> Scope:
        return replace(scope, audience_any_of=self.audience_any_of, scopes=self.scopes)

    def describe(self) -> dict[str, Any]:
        return {"audience_any_of": self.audience_any_of, "scopes": self.scopes}


class WriteDecision(BaseModel):
    model_config = ConfigDict(extra="ignore")

    allow: StrictBool
    reasons: list[str] = Field(default_factory=list)


@dataclass(frozen=True)
class Answer:
    """OPA's result, its decision id (present when OPA keeps decision logs), and
    the policy revision it was computed under (bundle revisions, or None)."""

    result: Any
    decision_id: str | None
    revision: str | None


@dataclass(frozen=True)
class Verdicts:
    """The decisions for one batch, and which OPA decision and revision made them."""

    decisions: dict[str, Decision]
    decision_id: str | None
    revision: str | None


class RuleReasons(BaseModel):
    model_config = ConfigDict(extra="ignore")

    rule: str
    reasons: list[str]


class Explanation(BaseModel):
    """whose.disclosure.explanation: the decision and, per rule, what it contributed."""

    model_config = ConfigDict(extra="ignore")

    decision: Decision
    rules: list[RuleReasons]


# What a record gets when the policy said nothing about it.
NO_DECISION = Decision(allow=False, usable_as="none", reasons=["no_decision"])


def policy_view(record: dict[str, Any]) -> dict[str, Any]:
    view = {k: v for k, v in record.items() if k not in _NOT_FOR_POLICY}
    proposition = view.get("proposition")
    if isinstance(proposition, dict):
        view["proposition"] = {k: v for k, v in proposition.items() if k in _PROPOSITION_FOR_POLICY}
    return view


@dataclass(frozen=True)
class DisclosureQuestion:
    asker: Identity
    audience: list[str]
    purpose: str
    now: datetime
    as_of: datetime | None = None

    def input(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        """The batch input (`decisions`)."""
        return self._context() | {"records": [policy_view(r) for r in records]}

    def single_input(self, record: dict[str, Any]) -> dict[str, Any]:
        """The single-record input (`single`, `explanation`)."""
        return self._context() | {"record": policy_view(record)}

    def _context(self) -> dict[str, Any]:
        return {
            "asker": self.asker.policy_view(),
            "audience": self.audience,
            "purpose": self.purpose,
            "now": iso(self.now),
            "as_of": iso(self.as_of or self.now),
        }


class PolicyClient:
    """One pooled keep-alive HTTP session to an OPA server (TCP or Unix socket)."""

    def __init__(self, url: str, timeout_s: float, unix_socket: str | None = None) -> None:
        self.url = url.rstrip("/")
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self.unix_socket = unix_socket
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        connector: aiohttp.BaseConnector
        if self.unix_socket:
            connector = aiohttp.UnixConnector(path=self.unix_socket)
        else:
            connector = aiohttp.TCPConnector(limit=100, keepalive_timeout=30)
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=self.timeout,
            json_serialize=lambda o: orjson.dumps(o).decode(),
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def disclosure(
        self, question: DisclosureQuestion, records: list[dict[str, Any]]
    ) -> Verdicts:
        """Decisions for a batch, keyed by record id. Missing ids are denials."""
        answer = await self._query(DISCLOSURE_RULE, question.input(records))
        decisions = _parse(answer.result, Decision)
        return Verdicts(
            {str(r["id"]): decisions.get(str(r["id"]), NO_DECISION) for r in records},
            answer.decision_id,
            answer.revision,
        )

    async def compile(self, query: str, input_: dict[str, Any], unknowns: list[str]) -> Any:
        """Partial evaluation (OPA's Compile API): the residue of `query` given `input_`.

        Raises Untranslatable when OPA's compiler refuses the query (the policy has no
        such rule, say), PolicyUnavailable when OPA cannot be asked at all.
        """
        payload = {"query": query, "input": input_, "unknowns": unknowns}
        status, answer = await self._post("/v1/compile", payload, "compile")
        if 400 <= status < 500:
            raise Untranslatable(f"OPA's compiler answered {status}")
        if status != 200:
            raise PolicyUnavailable(f"OPA answered {status}")
        if not isinstance(answer, dict):
            raise Untranslatable("OPA's compile answer is not an object")
        return answer.get("result", {})

    async def explain(
        self, question: DisclosureQuestion, record: dict[str, Any]
    ) -> tuple[Explanation, Answer]:
        """The single-record decision, with the denials grouped by the rule that made them."""
        answer = await self._query(EXPLAIN_RULE, question.single_input(record))
        try:
            return Explanation.model_validate(answer.result), answer
        except ValidationError as exc:
            raise PolicyUnavailable("OPA explanation is malformed") from exc

    async def ingest(
        self, writer: Identity, records: list[dict[str, Any]], premises: list[dict[str, Any]]
    ) -> dict[str, WriteDecision]:
        payload = {
            "writer": writer.policy_view(),
            "records": [policy_view(r) for r in records],
            "premises": [policy_view(p) for p in premises],
        }
        answer = await self._query(INGEST_RULE, payload)
        decisions = _parse(answer.result, WriteDecision)
        refused = WriteDecision(allow=False, reasons=["no_decision"])
        return {str(r["id"]): decisions.get(str(r["id"]), refused) for r in records}

    async def eval_seconds(
        self, question: DisclosureQuestion, records: list[dict[str, Any]]
    ) -> float:
        """OPA's own evaluation time for one disclosure batch (for the benchmark)."""
        path = f"/v1/data/{DISCLOSURE_RULE}?metrics=true"
        status, answer = await self._post(path, {"input": question.input(records)}, "bench")
        if status != 200:
            raise PolicyUnavailable(f"OPA answered {status}")
        return float(answer["metrics"]["timer_rego_query_eval_ns"]) / 1e9

    async def ready(self) -> bool:
        try:
            async with self._require_session().get(f"{self.url}/health") as response:
                return response.status == 200
        except (aiohttp.ClientError, TimeoutError, PolicyUnavailable):
            return False

    async def _query(self, rule: str, input_: dict[str, Any]) -> Answer:
        # provenance: the bundle revisions that made this answer (see Answer).
        path = f"/v1/data/{rule}?provenance=true"
        status, answer = await self._post(path, {"input": input_}, rule)
        if status != 200:
            raise PolicyUnavailable(f"OPA answered {status}")
        if not isinstance(answer, dict) or "result" not in answer:
            # An undefined rule (missing policy, wrong package) answers {} : deny.
            raise PolicyUnavailable("OPA returned no result")
        decision_id = answer.get("decision_id")
        return Answer(
            answer["result"],
            decision_id if isinstance(decision_id, str) else None,
            _revision(answer.get("provenance")),
        )

    async def _post(self, path: str, payload: dict[str, Any], label: str) -> tuple[int, Any]:
        """POST JSON to OPA: the status and, for a 200, the parsed answer (else None).

        OPA unreachable, too slow or answering unparseable JSON is PolicyUnavailable;
        every call is timed under `label` (whose_policy_call_seconds).
        """
        started = time.perf_counter()
        try:
            async with self._require_session().post(
                f"{self.url}{path}",
                data=orjson.dumps(payload),
                headers={"Content-Type": "application/json"},
            ) as response:
                if response.status != 200:
                    return response.status, None
                return 200, orjson.loads(await response.read())
        except (aiohttp.ClientError, TimeoutError, orjson.JSONDecodeError) as exc:
            raise PolicyUnavailable(f"OPA unreachable: {type(exc).__name__}") from exc
        finally:
            metrics.POLICY_SECONDS.labels(label).observe(time.perf_counter() - started)

    def _require_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise PolicyUnavailable("policy client is not started")
        return self._session


def _revision(provenance: Any) -> str | None:
    """One string naming every bundle revision OPA answered from, or None.

    None when OPA loaded its policy some other way (files, REST) or a bundle has
    no revision: then nothing says when the policy changed, so nothing may be cached.
    """
    if not isinstance(provenance, dict):
        return None
    bundles = provenance.get("bundles")
    if not isinstance(bundles, dict) or not bundles:
        return None
    revisions = {}
    for name, info in bundles.items():
        revision = info.get("revision") if isinstance(info, dict) else None
        if not isinstance(revision, str) or not revision:
            return None
        revisions[name] = revision
    if len(revisions) == 1:
        # One bundle: its revision alone, so replicas that load it under different
        # names (paths) still share cache entries.
        return next(iter(revisions.values()))
    return ",".join(f"{name}@{revision}" for name, revision in sorted(revisions.items()))


T = TypeVar("T", bound=BaseModel)


def _parse(result: Any, model: type[T]) -> dict[str, T]:
    if not isinstance(result, dict):
        raise PolicyUnavailable("OPA result is not an object")
    try:
        return {str(key): model.model_validate(value) for key, value in result.items()}
    except ValidationError as exc:
        raise PolicyUnavailable("OPA result is malformed") from exc
