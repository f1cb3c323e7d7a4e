"""The OPA client: one pooled keep-alive HTTP session to an OPA server.

It carries the questions policy/contract.py builds and reads back OPA's answers: the
result, OPA's decision id and the bundle revision the answer was computed under.
Anything other than a well-formed answer (OPA down, slow, erroring, or returning
the wrong shape) raises PolicyUnavailable, and callers disclose nothing: fail
closed.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import aiohttp
import orjson
from pydantic import BaseModel, TypeAdapter, ValidationError

from sidecar import metrics
from sidecar.auth.identity import Identity
from sidecar.errors import PolicyUnavailable as PolicyUnavailable
from sidecar.policy.contract import (
    NO_DECISION,
    BatchDecisions,
    Decision,
    DisclosureQuestion,
    ErasureAnswer,
    ErasureDecision,
    ErasureRequestView,
    Explanation,
    RetentionDecision,
    TrustInput,
    WriteDecision,
    erasure_input,
    retention_input,
    write_input,
)
from sidecar.policy.pushdown import Untranslatable

log = logging.getLogger("whose.policy")

# Every document the shipped policy reads lives under data.whose (rules and data).
POLICY_ROOT = "whose"
# The rules the sidecar queries (their METADATA marks them `entrypoint`).
DISCLOSURE_RULE = "whose/disclosure/batch"
INGEST_RULE = "whose/ingest/decisions"
EXPLAIN_RULE = "whose/disclosure/explanation"
ERASURE_RULE = "whose/erasure/answer"
RETENTION_RULE = "whose/retention/decisions"
RETENTION_HORIZON = "whose/retention/shortest_max_age_days"
TRUST_RULE = "whose/trust/adoptions"


@dataclass(frozen=True)
class Answer:
    """OPA's result, its decision id (present when OPA keeps decision logs), and
    the policy revision it was computed under (bundle revisions, or None)."""

    result: Any
    decision_id: str | None
    revision: str | None


class PolicyClient:
    """One pooled keep-alive HTTP session to an OPA server (TCP or Unix socket)."""

    def __init__(
        self,
        url: str,
        timeout_s: float,
        unix_socket: str | None = None,
        sources: dict[str, str] | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        # The Rego OPA loaded, when this sidecar made its bundle (the local OPA): what
        # the shape guard reads (policy/shape_guard.py). None for an OPA of its own.
        self._sources = sources
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self.unix_socket = unix_socket
        self._session: aiohttp.ClientSession | None = None
        # Per bundle revision: whether its bundles own everything the policy reads.
        self._owned: dict[str, bool] = {}

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
        self, question: DisclosureQuestion, records: list[dict[str, Any]], *, viewed: bool = False
    ) -> BatchDecisions:
        """Decisions for a batch, keyed by record id. Missing ids are denials.
        `viewed`: the records are already policy views (DisclosureQuestion.input)."""
        answer = await self._query(DISCLOSURE_RULE, question.input(records, viewed=viewed))
        result = answer.result if isinstance(answer.result, dict) else {}
        decisions = _parse_decisions(result.get("decisions"))
        vocabulary = result.get("vocabulary")
        if not isinstance(vocabulary, dict):
            raise PolicyUnavailable("OPA answered without the policy's vocabulary")
        return BatchDecisions(
            {str(r["id"]): decisions.get(str(r["id"]), NO_DECISION) for r in records},
            answer.decision_id,
            answer.revision,
            vocabulary,
            result.get("shape"),
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
    ) -> tuple[dict[str, WriteDecision], Answer]:
        """The write decision for each record of a batch (refused when the policy is
        silent about one), and the answer they came in (its decision id, revision)."""
        answer = await self._query(INGEST_RULE, write_input(writer, records, premises))
        decisions = _parse(answer.result, WriteDecision)
        refused = WriteDecision(allow=False, reasons=["no_decision"])
        return {str(r["id"]): decisions.get(str(r["id"]), refused) for r in records}, answer

    async def erasure(
        self,
        asker: Identity,
        request: ErasureRequestView,
        records: list[dict[str, Any]],
        now: datetime,
    ) -> tuple[ErasureAnswer, Answer]:
        """May the asker make the request, and erase each record? A record the policy
        says nothing about is refused (`no_decision`)."""
        answer = await self._query(ERASURE_RULE, erasure_input(asker, request, records, now))
        try:
            parsed = ErasureAnswer.model_validate(answer.result)
        except ValidationError as exc:
            raise PolicyUnavailable("OPA erasure answer is malformed") from exc
        refused = ErasureDecision(allow=False, reasons=["no_decision"])
        decisions = {str(r["id"]): parsed.decisions.get(str(r["id"]), refused) for r in records}
        return parsed.model_copy(update={"decisions": decisions}), answer

    async def retention(
        self, records: list[dict[str, Any]], now: datetime
    ) -> tuple[dict[str, RetentionDecision], Answer]:
        """Which records have outlived their maximum age (none the policy is silent on)."""
        answer = await self._query(RETENTION_RULE, retention_input(records, now))
        decisions = _parse(answer.result, RetentionDecision)
        kept = RetentionDecision(expire=False)
        return {str(r["id"]): decisions.get(str(r["id"]), kept) for r in records}, answer

    async def retention_horizon_days(self) -> float | None:
        """The shortest maximum age any retention rule sets, in days; None: no rules."""
        days = await self._value(RETENTION_HORIZON)
        if days is None:
            return None
        if not isinstance(days, int | float) or isinstance(days, bool) or days <= 0:
            raise PolicyUnavailable("OPA retention horizon is malformed")
        return float(days)

    async def trust(self, question: TrustInput) -> list[set[str]]:
        """For each claim, in order, the hearers who take it as their own belief."""
        answer = await self._query(TRUST_RULE, question.model_dump(mode="json", exclude_none=True))
        result = answer.result
        if (
            not isinstance(result, list)
            or len(result) != len(question.claims)
            or not all(
                isinstance(ids, list) and all(isinstance(i, str) for i in ids) for ids in result
            )
        ):
            raise PolicyUnavailable("OPA trust answer is malformed")
        return [set(ids) for ids in result]

    async def eval_seconds(
        self, question: DisclosureQuestion, records: list[dict[str, Any]]
    ) -> float:
        """OPA's own evaluation time for one disclosure batch (for the benchmark)."""
        path = f"/v1/data/{DISCLOSURE_RULE}?metrics=true"
        status, answer = await self._post(path, {"input": question.input(records)}, "bench")
        if status != 200:
            raise PolicyUnavailable(f"OPA answered {status}")
        return float(answer["metrics"]["timer_rego_query_eval_ns"]) / 1e9

    def policy_sources(self) -> dict[str, str] | None:
        """The policy's Rego by file, if this sidecar loaded it (else None: no shapes)."""
        return self._sources

    def standing_revision(self) -> str | None:
        """The revision every answer from now on is sure to come under, if one is.

        None for an OPA server: a bundle can be pushed to it at any moment, so only an
        answer says which revision is in force.
        """
        return None

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
        revision = _revision(answer.get("provenance"))
        if revision is not None and not await self._owns_policy_data(revision):
            revision = None
        return Answer(
            answer["result"], decision_id if isinstance(decision_id, str) else None, revision
        )

    async def _value(self, rule: str) -> Any:
        """A rule's value without input; None where the rule is undefined (a rule that
        may well be: the minimum of no retention rules)."""
        status, answer = await self._post(f"/v1/data/{rule}", {"input": {}}, rule)
        if status != 200 or not isinstance(answer, dict):
            raise PolicyUnavailable(f"OPA answered {status}")
        return answer.get("result")

    async def _owns_policy_data(self, revision: str) -> bool:
        """Whether the bundles OPA answered from own all of data.whose.

        A revision names what a decision was made under only if nothing else can
        change it: data pushed to OPA's REST API outside the bundles' roots (a
        directory synced from an HR system, say) changes decisions and not the
        revision. Then the revision cannot key a cache, and the answer is treated
        as having none (nothing cached). Asked once per revision.
        """
        if revision not in self._owned:
            status, answer = await self._get("/v1/data/system/bundles", "bundles")
            bundles = answer.get("result") if status == 200 and isinstance(answer, dict) else None
            roots = [
                root
                for bundle in (bundles or {}).values()
                if isinstance(bundle, dict)
                for root in _roots(bundle.get("manifest"))
            ]
            owned = any(root in ("", POLICY_ROOT) for root in roots)
            if not owned:
                log.warning(
                    "policy revision %s: its bundles do not own data.%s (roots %s); "
                    "decisions are not cached under it",
                    revision,
                    POLICY_ROOT,
                    roots,
                )
            self._owned[revision] = owned
        return self._owned[revision]

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

    async def _get(self, path: str, label: str) -> tuple[int, Any]:
        started = time.perf_counter()
        try:
            async with self._require_session().get(f"{self.url}{path}") as response:
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


def _roots(manifest: Any) -> list[str]:
    """A bundle manifest's roots; a manifest that names none owns everything."""
    if not isinstance(manifest, dict) or manifest.get("roots") is None:
        return [""]
    roots = manifest["roots"]
    return [r.strip("/") for r in roots if isinstance(r, str)] if isinstance(roots, list) else []


T = TypeVar("T", bound=BaseModel)
# A batch's decisions in one validation call rather than one per record.
_DECISIONS = TypeAdapter(dict[str, Decision])


def _parse_decisions(result: Any) -> dict[str, Decision]:
    if not isinstance(result, dict):
        raise PolicyUnavailable("OPA result is not an object")
    try:
        return _DECISIONS.validate_python(result)
    except ValidationError as exc:
        raise PolicyUnavailable("OPA result is malformed") from exc


def _parse(result: Any, model: type[T]) -> dict[str, T]:
    if not isinstance(result, dict):
        raise PolicyUnavailable("OPA result is not an object")
    try:
        return {str(key): model.model_validate(value) for key, value in result.items()}
    except ValidationError as exc:
        raise PolicyUnavailable("OPA result is malformed") from exc
