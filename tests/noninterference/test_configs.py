"""Noninterference under the documented configuration choices (issue 35, part 5).

The property of test_property.py, on stores that do not run the shipped defaults, where
two findings lived: with `config.erasure.on_derived` `erase`, an erasure answered the
ids of the derived records it erased with the one named, which the asker may not see
(writes/eraser.py); with pushdown off, or a denial outside `visible_to`, hidden records
could fill the branches of a hybrid recall (reads/reader.py `_fused`).

What is drawn, and how. Per example, Hypothesis draws the policy data,
`config.erasure.on_derived` (erase half the time, withdraw, flag) and
`config.stale.withhold` (any of superseded, erased, withdrawn, stale), beside the world
and the requests; the worlds hold derivations (strategies.Plan.derivations): hidden
records derived from shared ones, most of those the asker's own, and an erasure of
such a premise among the requests. Both stores use an OPA of the test's own (`opa run
--server`, the policy folder loaded as files), into which harness.Stores.enter writes
the example's policy data and tenant before its first request. A decision made under
an earlier example's data cannot be served: these answers name no bundle revision, so
the sidecars cache no decision (checked at the end: no cache hit), and each example
has a tenant of its own, which every cache key names besides.

The sidecar settings take a restart: the pair runs with WHOSE_PUSHDOWN=false (every
hidden record a candidate of every search), on the embedded store (the findings are
the sidecar's, not the backend's). Pushdown on is the property's own setting, and the
property runs with decision shapes on the embedded store and without them
(WHOSE_DECIDE_SHAPES=false) on the Qdrant server: shapes and the cache are out of play
here, under an OPA the sidecar does not load itself.

Examples: profiles.config_examples (ci: 40; WHOSE_NI_CONFIG_EXAMPLES). With
writes/eraser.py and writes/retention.py of 5f77e2a the test fails on the cascade
(`--hypothesis-seed=2` reproduces it): an erasure of the asker's record answers the id
of a hidden record derived from it. Not drawn here: records withheld only by
`stale.withhold` as hidden records (a denial outside `visible_to` under pushdown on:
test_text_scores.py holds such a denial), policy data with shapes and the cache on,
and worlds large enough for the hybrid-branch finding, which
tests/integration/test_hybrid_branches.py holds.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace

import httpx
import pytest
from hypothesis import given, reject

from tests.conftest import REPORT, Backend, ops
from tests.noninterference import profiles
from tests.noninterference.harness import (
    Stores,
    TenantPool,
    WorldDiverged,
    check,
    counters,
    prepare_policy,
    start_stores,
)
from tests.noninterference.strategies import OP_KINDS, cases
from tests.noninterference.world import Case

pytestmark = pytest.mark.filterwarnings(
    "ignore:Api key is used with an insecure connection:UserWarning"
)

# Erasures (the cascade) and recalls (the hybrid branches) more often than the rest.
KINDS = (*OP_KINDS, "erase", "erase", "erase", "delete", "recall", "recall")


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stores]:
    folder = tmp_path_factory.mktemp("configs")
    # No tenants in the folder: Stores.enter gives OPA each example's.
    policy = prepare_policy(folder / "rego", 0)
    settings = {"WHOSE_PUSHDOWN": "false"}
    yield from start_stores(
        folder, policy, TenantPool(10**6), Backend("edge"), settings, own_opa=True
    )


def cache_hits(stores: Stores) -> int:
    """Decisions both sidecars served from their decision caches so far."""
    hits = 0.0
    for base in (stores.a.base, stores.b.base):
        metrics = counters(httpx.get(f"{ops(base)}/metrics", timeout=30).text)
        hits += metrics.get('whose_decision_cache_total{result="hit"}', 0)
    return int(hits)


def test_under_any_policy_data_hidden_records_change_nothing_the_asker_observes(
    stores: Stores,
) -> None:
    # At least one shared record: a premise.
    plan = replace(profiles.plan(), derivations=True, policy_data=True, shared=(1, 5))
    if not os.environ.get("WHOSE_NI_OPS"):
        plan = replace(plan, op_kinds=KINDS)
    started = time.monotonic()
    counts = {"examples": 0, "rejected": 0, "pairs": 0, "hidden": 0, "derived": 0}
    drawn: Counter[str] = Counter()

    @profiles.hypothesis_settings(profiles.config_examples())
    @given(case=cases(plan))
    def run(case: Case) -> None:
        counts["examples"] += 1
        if case.data is not None:
            drawn[case.data.on_derived] += 1
            drawn.update(case.data.withhold)
        try:
            checked = check(stores, case)
        except WorldDiverged:
            counts["rejected"] += 1
            reject()
        counts["pairs"] += checked.pairs
        counts["hidden"] += checked.hidden_stored
        counts["derived"] += checked.derived_stored

    try:
        run()
    finally:
        REPORT.append(
            f"noninterference under drawn policy data (WHOSE_PUSHDOWN=false): "
            f"{counts['pairs']} request pairs in {counts['examples']} example runs "
            f"({counts['rejected']} rejected), {counts['hidden']} hidden records stored "
            f"({counts['derived']} derived); on_derived and withhold drawn "
            f"{dict(sorted(drawn.items()))}; {time.monotonic() - started:.0f} s"
        )
    # As Stores.enter says: no decision came from the cache.
    assert cache_hits(stores) == 0
