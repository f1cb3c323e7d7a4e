"""The OPA server engine: one pooled keep-alive HTTP session to an OPA server.

It carries the questions of the policy engine (policy/engine.py) to OPA's REST API and
reads back the result, OPA's decision id and the bundle revision the answer was
computed under. Anything other than a well-formed answer (OPA down, slow, erroring,
or returning the wrong shape) raises PolicyUnavailable, and callers disclose
nothing: fail closed.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import aiohttp
import orjson

from sidecar import metrics
from sidecar.errors import PolicyUnavailable as PolicyUnavailable
from sidecar.policy.contract import DisclosureQuestion
from sidecar.policy.engine import DISCLOSURE_RULE as DISCLOSURE_RULE
from sidecar.policy.engine import POLICY_ROOT, OpaAnswer, PolicyEngine, Untranslatable
from sidecar.policy.readset import ReadSet

log = logging.getLogger("whose.policy")


class PolicyClient(PolicyEngine):
    """One pooled keep-alive HTTP session to an OPA server (TCP or Unix socket)."""

    def __init__(
        self,
        url: str,
        timeout_s: float,
        unix_socket: str | None = None,
        read_set: tuple[str, ReadSet] | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        # What the policy OPA loaded reads, when this sidecar made its bundle (the local
        # OPA server: policy/linked_opa.py analyse_bundle). None for an OPA of its own.
        self._read_set = read_set
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

    async def compile(self, query: str, input_: dict[str, Any], unknowns: list[str]) -> Any:
        payload = {"query": query, "input": input_, "unknowns": unknowns}
        status, answer = await self._post("/v1/compile", payload, "compile")
        if 400 <= status < 500:
            raise Untranslatable(f"OPA's compiler answered {status}")
        if status != 200:
            raise PolicyUnavailable(f"OPA answered {status}")
        if not isinstance(answer, dict):
            raise Untranslatable("OPA's compile answer is not an object")
        return answer.get("result", {})

    async def eval_seconds(
        self, question: DisclosureQuestion, records: list[dict[str, Any]]
    ) -> float:
        path = f"/v1/data/{DISCLOSURE_RULE}?metrics=true"
        status, answer = await self._post(path, {"input": question.input(records)}, "bench")
        if status != 200:
            raise PolicyUnavailable(f"OPA answered {status}")
        return float(answer["metrics"]["timer_rego_query_eval_ns"]) / 1e9

    def read_set(self) -> tuple[str, ReadSet] | None:
        return self._read_set

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

    async def _query(self, rule: str, input_: dict[str, Any]) -> OpaAnswer:
        # provenance: the bundle revisions that made this answer (see OpaAnswer).
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
        return OpaAnswer(
            answer["result"], decision_id if isinstance(decision_id, str) else None, revision
        )

    async def _value(self, rule: str) -> Any:
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
