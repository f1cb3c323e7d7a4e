"""The policy engine: what the sidecar asks OPA, whoever evaluates it.

Two engines implement it: an OPA server over HTTP (policy/opa.py, the deployment's own
or the local one the sidecar starts) and OPA's evaluator linked into this process
(policy/linked_opa.py, the embedded default). They differ only in how a rule is
evaluated (`_query`, `_value`, `compile`); the questions (policy/contract.py builds
their input) and the reading of the answers are the same code, here. Anything other
than a well-formed answer raises PolicyUnavailable, and callers disclose nothing:
fail closed.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from sidecar.auth.identity import Identity
from sidecar.errors import PolicyUnavailable
from sidecar.policy.contract import (
    NO_DECISION,
    BatchDecisions,
    CollectionAction,
    CollectionAnswer,
    CollectionDecision,
    ConsentAction,
    ConsentAnswer,
    ConsentGrant,
    ConversationsInput,
    Decision,
    DisclosureQuestion,
    ErasureAnswer,
    ErasureDecision,
    ErasureRequestView,
    Explanation,
    ForgetAction,
    ForgetRuleDecision,
    ForgetRuleView,
    ForgetWriteDecision,
    LabelDecision,
    LabelingDocument,
    RetentionDecision,
    TrustInput,
    WriteDecision,
    collections_input,
    consent_input,
    erasure_input,
    forgetting_input,
    labeling_input,
    retention_input,
    write_input,
)
from sidecar.policy.readset import ReadSet

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
LABELING_RULE = "whose/labeling/decisions"
COLLECTIONS_RULE = "whose/collections/decision"
CONSENT_RULE = "whose/consent/decision"
CONVERSATIONS_RULE = "whose/conversations/decision"
FORGET_RULE = "whose/forgetting/rule"
FORGET_WRITES = "whose/forgetting/writes"


class Untranslatable(Exception):
    """OPA's compiler refused a partial evaluation, or answered what cannot be read
    (policy/pushdown.py then derives no store filter)."""


@dataclass(frozen=True)
class OpaAnswer:
    """OPA's result, its decision id (present when OPA keeps decision logs), and
    the policy revision it was computed under (bundle revisions, or None)."""

    result: Any
    decision_id: str | None
    revision: str | None


class PolicyEngine(ABC):
    """OPA, asked the sidecar's questions."""

    @abstractmethod
    async def start(self) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...

    @abstractmethod
    async def ready(self) -> bool: ...

    @abstractmethod
    async def _query(self, rule: str, input_: dict[str, Any]) -> OpaAnswer:
        """A rule's value for `input_`; PolicyUnavailable when it is undefined."""

    @abstractmethod
    async def _value(self, rule: str) -> Any:
        """A rule's value without input; None where the rule is undefined (a rule that
        may well be: the minimum of no retention rules)."""

    @abstractmethod
    async def compile(self, query: str, input_: dict[str, Any], unknowns: list[str]) -> Any:
        """Partial evaluation (OPA's Compile API): the residue of `query` given `input_`.

        Raises Untranslatable when OPA's compiler refuses the query (the policy has no
        such rule, say), PolicyUnavailable when OPA cannot be asked at all.
        """

    @abstractmethod
    async def eval_seconds(
        self, question: DisclosureQuestion, records: list[dict[str, Any]]
    ) -> float:
        """OPA's own evaluation time for one disclosure batch (for the benchmark)."""

    @abstractmethod
    def standing_revision(self) -> str | None:
        """The revision every answer from now on is sure to come under, if one is (a
        request that finds every decision cached under it need not ask to confirm)."""

    @abstractmethod
    def read_set(self) -> tuple[str, ReadSet] | None:
        """The revision of the policy this sidecar loaded, and what its disclosure
        decision reads of a record, computed from the compiled policy
        (policy/readset.py); None when the policy is not at hand (an OPA server of the
        deployment's own): then no decision is shared."""

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
        )

    async def explain(
        self, question: DisclosureQuestion, record: dict[str, Any]
    ) -> tuple[Explanation, OpaAnswer]:
        """The single-record decision, with the denials grouped by the rule that made them."""
        answer = await self._query(EXPLAIN_RULE, question.single_input(record))
        try:
            return Explanation.model_validate(answer.result), answer
        except ValidationError as exc:
            raise PolicyUnavailable("OPA explanation is malformed") from exc

    async def ingest(
        self, writer: Identity, records: list[dict[str, Any]], premises: list[dict[str, Any]]
    ) -> tuple[dict[str, WriteDecision], OpaAnswer]:
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
    ) -> tuple[ErasureAnswer, OpaAnswer]:
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

    async def forget_rule(
        self, asker: Identity, action: ForgetAction, rule: ForgetRuleView
    ) -> ForgetRuleDecision:
        """May the asker set (or lift) the forget rule? Every reason it may not."""
        answer = await self._query(FORGET_RULE, forgetting_input(asker, action, rule))
        try:
            return ForgetRuleDecision.model_validate(answer.result)
        except ValidationError as exc:
            raise PolicyUnavailable("OPA forgetting answer is malformed") from exc

    async def forget_writes(
        self,
        writer: Identity,
        records: list[dict[str, Any]],
        carried: dict[str, list[ForgetRuleView]],
    ) -> dict[str, ForgetWriteDecision]:
        """For each record that carries a rule: the rules that bind it and what becomes
        of it. A record the policy is silent about is refused (fail closed)."""
        question = forgetting_input(writer, "write", None, records, carried)
        answer = await self._query(FORGET_WRITES, question)
        decisions = _parse(answer.result, ForgetWriteDecision)
        refused = ForgetWriteDecision(action="refuse", rules=["no_decision"])
        return {i: decisions.get(i, refused) for i in carried}

    async def retention(
        self, records: list[dict[str, Any]], now: datetime
    ) -> tuple[dict[str, RetentionDecision], OpaAnswer]:
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

    async def labels(
        self, writer: Identity, documents: list[LabelingDocument], collection: str | None = None
    ) -> list[LabelDecision]:
        """For each document a writer writes, in order, its labels (whose it is, who may
        read it) or the reasons it has none: one call for the batch."""
        if not documents:
            return []
        answer = await self._query(LABELING_RULE, labeling_input(writer, documents, collection))
        result = answer.result
        if not isinstance(result, list) or len(result) != len(documents):
            raise PolicyUnavailable("OPA labeling answer is malformed")
        try:
            return _LABELS.validate_python(result)
        except ValidationError as exc:
            raise PolicyUnavailable("OPA labeling answer is malformed") from exc

    async def collection_action(
        self,
        asker: Identity,
        action: CollectionAction,
        name: str,
        creator: str | None = None,
        *,
        created_at: datetime | None = None,
    ) -> CollectionDecision:
        """May the asker do `action` to the stack collection `name` of their tenant
        (`creator`: who created it, None for create or when none is recorded)? Every
        reason it may not; PolicyUnavailable when the policy gives no well-formed
        answer (the caller then changes nothing)."""
        question = collections_input(asker, action, name, creator, created_at)
        answer = await self._query(COLLECTIONS_RULE, question)
        try:
            parsed = CollectionAnswer.model_validate(answer.result)
        except ValidationError as exc:
            raise PolicyUnavailable("OPA collections answer is malformed") from exc
        return CollectionDecision(parsed.allow, tuple(parsed.reasons))

    async def consent(
        self, asker: Identity, action: ConsentAction, grant: ConsentGrant, now: datetime
    ) -> ConsentAnswer:
        """May the asker give (or revoke) the grant? Every reason it may not;
        PolicyUnavailable when the policy gives no well-formed answer (the caller then
        changes nothing)."""
        answer = await self._query(CONSENT_RULE, consent_input(asker, action, grant, now))
        try:
            return ConsentAnswer.model_validate(answer.result)
        except ValidationError as exc:
            raise PolicyUnavailable("OPA consent answer is malformed") from exc

    async def conversation(self, question: ConversationsInput) -> CollectionDecision:
        """May the writer record a membership event, or resolve hearers from membership?
        Every reason it may not; PolicyUnavailable when the answer is malformed."""
        answer = await self._query(
            CONVERSATIONS_RULE, question.model_dump(mode="json", exclude_none=True)
        )
        try:
            parsed = CollectionAnswer.model_validate(answer.result)
        except ValidationError as exc:
            raise PolicyUnavailable("OPA conversations answer is malformed") from exc
        return CollectionDecision(parsed.allow, tuple(parsed.reasons))


T = TypeVar("T", bound=BaseModel)
_LABELS = TypeAdapter(list[LabelDecision])
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
