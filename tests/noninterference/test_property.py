"""Noninterference: records the asker may not see change nothing the asker observes.

For any asker and response audience, two stores that differ only by records the
asker may not see must give that asker identical observations on every route
the asker can call: HTTP status, body (decision ids, request timing and
`recorded_at` aside; ids the sidecar generates compared up to a consistent
renaming) and the order of results, and the change in every counter of the
public listener's /metrics.

Hypothesis draws an asker (a principal and the groups their token claims), a
shared world written identically to store A and store B, hidden records written
to store B only (in the asker's own chains, in other holders' chains on the same
keys, before and after shared versions, future-dated, derived, in another tenant;
hidden by audience, scope or tenant), and a sequence of requests (native reads,
recalls by words, by vector or both, ranked hybrid, dense or lexical; Qdrant reads
through the unmodified qdrant-client with generated filters, writes, observations,
witnessed events and write refusals, and every MCP tool through the MCP SDK's client)
run against both stores; see harness.py and strategies.py. A difference fails with
the request, both normalised answers, what differs, and the (shrunk) example.

The stores run on each store backend: on the embedded store with the shipped settings,
on the Qdrant server without decision shapes (WHOSE_DECIDE_SHAPES=false: each record
decided and cached alone), so that every run holds shapes on and off. Other policy
data and pushdown off: test_configs.py.

How many examples, and how big, comes from the Hypothesis profile (profiles.py):
`ci` (the default) fits in about a minute on two cores; `long` compares more than
100 000 request pairs:

    WHOSE_HYPOTHESIS_PROFILE=long .venv/bin/pytest tests/noninterference/test_property.py
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from hypothesis import given, reject

from tests.conftest import REPORT, Backend, ops
from tests.noninterference import profiles
from tests.noninterference.harness import (
    NoninterferenceViolated,
    Stores,
    WorldDiverged,
    check,
    counters,
)
from tests.noninterference.strategies import cases
from tests.noninterference.world import Asker, Case, Op, Rec, Ref

pytestmark = pytest.mark.filterwarnings(
    "ignore:Api key is used with an insecure connection:UserWarning"
)


_settings = profiles.hypothesis_settings

# Beside the defaults, per store backend (see the module's docstring); conftest.py's
# `stores` fixture reads it.
STORE_SETTINGS = {"edge": {}, "server": {"WHOSE_DECIDE_SHAPES": "false"}}


STATS = {
    "examples": 0,
    "rejected": 0,
    "pairs": 0,
    "hidden": 0,
    "shared": 0,
    "control": 0,
    "control_pairs": 0,
    "ties": 0,
}


@pytest.fixture(scope="module", autouse=True)
def report() -> Iterator[None]:
    started = time.monotonic()
    yield
    REPORT.append(
        "noninterference ({profile} profile): {pairs} request pairs compared in {examples} "
        "example runs (shrinking included; {rejected} rejected), {shared} shared and {hidden} "
        "hidden records stored; control: {control_pairs} pairs in {control} runs; "
        "{ties} recall pairs agreed only up to exactly equal scores; {seconds:.0f} s".format(
            profile=profiles.profile(), seconds=time.monotonic() - started, **STATS
        )
    )


def _check(stores: Stores, case: Case, pairs: str = "pairs") -> None:
    try:
        checked = check(stores, case)
    except WorldDiverged:
        STATS["rejected"] += 1
        reject()
    STATS[pairs] += checked.pairs
    STATS["ties"] += checked.ties
    STATS["hidden"] += checked.hidden_stored
    STATS["shared"] += checked.shared_stored


def test_records_the_asker_may_not_see_change_nothing_the_asker_observes(
    stores: Stores, store_backend: Backend
) -> None:
    # Hypothesis inside the test: the number of examples depends on the backend.
    @_settings(profiles.examples(store_backend.name))
    @given(case=cases(profiles.plan()))
    def run(case: Case) -> None:
        STATS["examples"] += 1
        _check(stores, case)

    run()


def test_the_harness_sees_no_difference_between_equal_stores(stores: Stores) -> None:
    """The control: without hidden records the two stores must agree on everything
    (else a difference the property reports could be noise of the harness)."""

    @_settings(profiles.control_examples())
    @given(case=cases(profiles.plan(), with_hidden=False))
    def run(case: Case) -> None:
        STATS["control"] += 1
        _check(stores, case, "control_pairs")

    run()


def test_the_harness_fails_when_the_extra_record_is_visible(stores: Stores) -> None:
    """Honesty: an extra record in B that the asker MAY see must make the diff fail."""
    mine = Rec(
        seed=1,
        holder="bob",
        key="k0",
        value=1,
        modality="believed",
        audience=("bob",),
        valid_at="2026-01-01T00:00:00Z",
    )
    visible = Rec(
        seed=2,
        holder="alice",
        key="k0",
        value=2,
        modality="believed",
        audience=("alice", "bob"),
        valid_at="2026-01-01T00:00:00Z",
        hidden_by="audience",
    )
    recall = Op("recall", {"query": "claim", "audience": [], "limit": 10})
    count = Op("count", {"filter": None, "exact": True})
    get = Op("get", {"ref": Ref("hidden", 0)})
    for request in (recall, count, get):
        case = Case(Asker("bob"), (mine,), ((0, visible),), (request,))
        with pytest.raises(
            NoninterferenceViolated, match=request.kind if request is not get else "GET"
        ):
            check(stores, case, verify_hidden=False)
    # And a world whose "hidden" record the asker may see is refused, not compared.
    with pytest.raises(AssertionError, match="generator bug"):
        check(stores, Case(Asker("bob"), (mine,), ((0, visible),), (recall,)))


def test_the_stores_run_their_backends_settings(stores: Stores, store_backend: Backend) -> None:
    """STORE_SETTINGS took: decisions shared by shape on the embedded store, each record
    decided alone on the server."""
    mode = "record" if store_backend.name == "server" else "shape"
    for base in (stores.a.base, stores.b.base):
        sharing = counters(httpx.get(f"{ops(base)}/metrics", timeout=30).text)
        assert sharing.get(f'whose_decision_sharing{{mode="{mode}"}}') == 1, sharing
