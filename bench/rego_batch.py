"""The shipped disclosure policy: evaluation per candidate, and batch vs single calls.

    .venv/bin/python bench/rego_batch.py [--rounds 30] [--policy DIR]

Builds 40 candidates of every shape the policy words (beliefs, knowledge with and
without evidence, current and ended world state from a change record or not, common
knowledge announced on a qualifying channel or witnessed, perceptions, views of
another's mind, scoped records, records some hearer may not see), as
sidecar/policy/contract.py shows them to OPA, for an asker with an audience of two. Then,
in one run:

- `opa bench` on data.whose.disclosure.batch with those 40: OPA's evaluation alone,
  per candidate;
- as the sidecar sees it (sidecar/policy/opa.py's client over OPA's Unix socket): 40
  single-record calls against one batch call of the same 40, median over rounds,
  interleaved, and their ratio. The batch's decisions are checked to equal the single
  calls' one by one;
- the same with OPA's evaluator linked in (sidecar/policy/linked_opa.py, the embedded
  default), whose own evaluation time is the library's (parsing the input aside);
- by shape (sidecar/policy/shape.py, on what the compiled policy reads,
  sidecar/policy/readset.py; as the gate asks when nothing is cached yet): OPA
  evaluates one representative per shape, and its time is spread over the 40. Each
  candidate's decision by shape is checked to equal its own;
- through the gate (sidecar/reads/gate.py, the read path's one door to the policy),
  linked in: a batch of the 40 with nothing cached (shapes drawn, one OPA call), and
  with every decision cached (no OPA call: the evaluator's revision stands).

`--policy` names another policy directory (another revision's rego/, say) to compare.
Figures on a busy machine move together; read the ratios, not the absolute times.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sidecar.audit.sqlite_sink import SqliteSink  # noqa: E402
from sidecar.audit.writer import AuditLog  # noqa: E402
from sidecar.auth.identity import Identity  # noqa: E402
from sidecar.policy.cache import Keys, LocalCache  # noqa: E402
from sidecar.policy.contract import DisclosureQuestion, policy_view  # noqa: E402
from sidecar.policy.engine import PolicyEngine  # noqa: E402
from sidecar.policy.linked_opa import LinkedOpa, analyse_bundle  # noqa: E402
from sidecar.policy.local_opa import make_bundle  # noqa: E402
from sidecar.policy.opa import PolicyClient  # noqa: E402
from sidecar.policy.readset import ReadSet  # noqa: E402
from sidecar.policy.shape import Shaper  # noqa: E402
from sidecar.reads.gate import Gate  # noqa: E402
from sidecar.record import Stored  # noqa: E402
from tests.conftest import OPA_BINARY, OPA_LIBRARY, start_opa, stop  # noqa: E402
from tests.integration.test_policy_contract import stored  # noqa: E402

CANDIDATES = 40
NOW = datetime(2026, 11, 30, tzinfo=UTC)
POLICY = REPO / "rego"


SHAPES: list[dict[str, Any]] = [
    {},
    {"modality": "believed", "audience": ["alice", "bob", "carol"]},
    {"modality": "asserted", "access_scope": "launch-core"},
    {"audience": ["alice"]},  # bob and carol may not see it
    {
        "modality": "known",
        "evidence": [{"kind": "change_record", "ref": "CR-1", "at": "2026-09-30T00:00:00Z"}],
    },
    {"modality": "known", "evidence": [{"kind": "hearsay", "ref": "x"}]},
    {
        "modality": "known",
        "observed_id": "bob",
        "observed_attitude": "knows",
        "evidence": [{"kind": "acknowledgement", "ref": "ack-7", "by": "bob"}],
    },
    {
        "modality": "world_state",
        "observer_id": None,
        "source": {"kind": "change_record"},
        "evidence": [{"kind": "change_record", "ref": "CR-2"}],
    },
    {
        "modality": "world_state",
        "observer_id": None,
        "source": {"kind": "change_record"},
        "invalid_at": "2026-11-01T00:00:00Z",
    },
    {"modality": "world_state", "observer_id": None, "source": {"kind": "conversation"}},
    {
        "modality": "common_knowledge",
        "source": {"kind": "announcement", "channel": "all-hands"},
        "audience": ["group:launch-team"],
    },
    {
        "modality": "common_knowledge",
        "source": {
            "kind": "announcement",
            "channel": "standup",
            "participants": ["alice", "bob", "carol"],
        },
        "evidence": [{"kind": "witnessed", "ref": "w", "by": p} for p in ("alice", "bob", "carol")],
        "audience": ["group:launch-team"],
    },
    {
        "modality": "observed",
        "source": {"kind": "perception", "participants": ["alice", "bob"]},
        "evidence": [{"kind": "witnessed", "ref": "w", "by": "alice"}],
    },
    {"modality": "believed", "observed_id": "carol", "observed_attitude": "believes"},
    {"audience": ["alice", "group:launch-team"], "access_scope": "launch-core", "tenant": "acme"},
    {"modality": "inferred", "audience": ["group:launch-team", "carol"]},
]


def candidates() -> list[dict[str, Any]]:
    return [stored(**SHAPES[i % len(SHAPES)]) for i in range(CANDIDATES)]


def question() -> DisclosureQuestion:
    asker = Identity("carol", "acme", groups=("launch-team",), scopes=("launch-core",))
    return DisclosureQuestion(asker, ["alice", "bob"], "recall", NOW)


def opa_bench(records: list[dict[str, Any]], policy: Path, tmp: Path) -> tuple[float, float]:
    """`opa bench`'s evaluation of the batch rule over these records: median and
    minimum ns (the minimum is the least disturbed by other work on the machine)."""
    path = tmp / "input.json"
    path.write_text(json.dumps(question().input(records)))
    command = [str(OPA_BINARY), "bench", "--data", str(policy), "--ignore", "*_test.rego"]
    command += ["--input", str(path), "--format", "json"]
    command += ["data.whose.disclosure.batch"]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    extra = json.loads(out)["Extra"]
    timer = "histogram_timer_rego_query_eval_ns"
    return float(extra[f"{timer}_median"]), float(extra[f"{timer}_min"])


def by_shape(
    records: list[dict[str, Any]], read_set: ReadSet
) -> tuple[list[dict[str, Any]], list[str]]:
    """The representatives the gate would ask about, and each record's shape id."""
    if not read_set.shares:
        raise SystemExit(f"the policy shares no decision: {read_set.describe()}")
    keys = Keys(question(), "bench", 5.0)
    shaper = Shaper(read_set)
    shapes = [shaper.shape_of(policy_view(r), keys.instants) for r in records]
    if any(s is None for s in shapes):
        raise SystemExit("a candidate has no shape")
    ids = [s.id for s in shapes if s is not None]
    representatives = {s.id: s.representative for s in shapes if s is not None}
    return list(representatives.values()), ids


async def calls(
    records: list[dict[str, Any]], client: PolicyEngine, read_set: ReadSet, rounds: int
) -> tuple[float, float, float, float, int]:
    """Median seconds for 40 single calls, for one batch of the same 40, for OPA's
    own evaluation of that batch (the rest is encoding, the socket, OPA parsing the
    input, and reading the answer), and for its evaluation of the batch's shapes; and
    how many shapes the 40 are."""
    await client.start()
    q = question()
    try:
        batch = await client.disclosure(q, records)
        for r in records:
            alone = (await client.disclosure(q, [r])).decisions[r["id"]]
            if alone != batch.decisions[r["id"]]:
                raise SystemExit(f"batch and single disagree on {r['id']}")
        representatives, shape_ids = by_shape(records, read_set)
        shaped = (await client.disclosure(q, representatives)).decisions
        for r, shape_id in zip(records, shape_ids, strict=True):
            if shaped[shape_id] != batch.decisions[r["id"]]:
                raise SystemExit(f"by shape and by record disagree on {r['id']}")
        singles, batches, evals, shape_evals = [], [], [], []
        for _ in range(rounds):
            started = time.perf_counter()
            for r in records:
                await client.disclosure(q, [r])
            singles.append(time.perf_counter() - started)
            started = time.perf_counter()
            await client.disclosure(q, records)
            batches.append(time.perf_counter() - started)
            evals.append(await client.eval_seconds(q, records))
            shape_evals.append(await client.eval_seconds(q, representatives))
        return (
            statistics.median(singles),
            statistics.median(batches),
            statistics.median(evals),
            statistics.median(shape_evals),
            len(representatives),
        )
    finally:
        await client.close()


async def through_the_gate(
    records: list[dict[str, Any]], linked: LinkedOpa, tmp: Path, rounds: int
) -> tuple[float, float]:
    """Median seconds for one batch of the 40 through the gate: nothing cached (a gate
    without a cache), and everything cached. Checked against the evaluator's own."""
    await linked.start()
    audit = AuditLog(SqliteSink(tmp / "audit.sqlite3"), None, queue_size=100_000)
    stored = [s for r in records if (s := Stored.from_payload(r)) is not None]
    q = question()
    try:
        alone = (await linked.disclosure(q, records)).decisions

        async def decide(gate: Gate) -> float:
            started = time.perf_counter()
            async with gate.begin(q, "bench") as disclosure:
                decided = await disclosure.decide(stored)
            spent = time.perf_counter() - started
            if decided != alone:
                raise SystemExit("the gate and the evaluator disagree")
            return spent

        warm = Gate(linked, LocalCache(10_000, ttl_s=600), audit, bucket_s=600)
        for _ in range(2):
            await decide(warm)  # the revision heard, then every decision cached
        cold, cached = [], []
        for _ in range(rounds):
            cold.append(await decide(Gate(linked, LocalCache(0, ttl_s=1), audit, bucket_s=600)))
            cached.append(await decide(warm))
        return statistics.median(cold), statistics.median(cached)
    finally:
        await audit.close()
        await linked.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--policy", type=Path, default=POLICY)
    args = parser.parse_args()
    records = candidates()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        median, least = opa_bench(records, args.policy, tmp)
        for name, ns in (("median", median), ("min", least)):
            print(
                f"opa bench, {CANDIDATES} candidates, {name}: {ns / 1e6:.3f} ms per batch, "
                f"{ns / 1e3 / CANDIDATES:.1f} µs per candidate"
            )
        make_bundle(args.policy, tmp / "analysed")
        _, read_set = analyse_bundle(OPA_LIBRARY, tmp / "analysed")
        socket = str(tmp / "opa.sock")
        _, opa = start_opa(args.policy, tmp / "opa.log", extra=("--addr", f"unix://{socket}"))
        try:
            server = PolicyClient("http://opa", 10.0, unix_socket=socket)
            measured = {
                "over the Unix socket": asyncio.run(calls(records, server, read_set, args.rounds))
            }
        finally:
            stop(opa)
        linked = LinkedOpa(OPA_LIBRARY, args.policy, tmp / "linked-bundle", 10.0)
        measured["linked in"] = asyncio.run(calls(records, linked, read_set, args.rounds))
        gate_cold, gate_cached = asyncio.run(through_the_gate(records, linked, tmp, args.rounds))
    for how, (single, batch, evaluation, by_shapes, shapes) in measured.items():
        print(
            f"{how}: {CANDIDATES} single calls {single * 1e3:.2f} ms, "
            f"one batch {batch * 1e3:.2f} ms (OPA's evaluation {evaluation * 1e3:.2f} ms, "
            f"{evaluation * 1e6 / CANDIDATES:.0f} µs per candidate), "
            f"ratio {single / batch:.1f}x; by shape ({shapes} shapes, nothing cached): "
            f"{by_shapes * 1e3:.2f} ms, {by_shapes * 1e6 / CANDIDATES:.0f} µs per candidate"
        )
    print(
        f"through the gate, linked in, {CANDIDATES} candidates: nothing cached "
        f"{gate_cold * 1e3:.2f} ms ({gate_cold * 1e6 / CANDIDATES:.0f} µs per candidate), "
        f"all cached {gate_cached * 1e3:.2f} ms ({gate_cached * 1e6 / CANDIDATES:.0f} µs "
        "per candidate)"
    )


if __name__ == "__main__":
    main()
