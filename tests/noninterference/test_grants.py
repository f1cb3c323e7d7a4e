"""Noninterference with grants: records the asker may not see change nothing the asker
observes, when subjects have granted categories of their records (to the asker, to
a group, to others; some grants ending before the first request, with no write), and
when the asker gives, revokes and lists grants of their own (policy/grants.py).

The worlds of test_property.py, with categories on the records and grants given in
both stores before the world is written; a hidden record is one no grant in force
reveals (world.Asker.may_see), so a grant that ended, one for another category or
subject, or one the asker is no reader of must show nothing of it. The requests mix
the native reads, recalls with an audience (a grant of the asker's then decides what
the audience may hear), the MCP tools, and the grant routes, whose answers must not
depend on any record either. On each store backend, as test_property.py.

    WHOSE_HYPOTHESIS_PROFILE=long .venv/bin/pytest tests/noninterference/test_grants.py
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, reject

from tests.conftest import Backend
from tests.noninterference import profiles
from tests.noninterference.harness import NoninterferenceViolated, Stores, WorldDiverged, check
from tests.noninterference.strategies import GRANT_KINDS, cases
from tests.noninterference.world import Asker, Case, GrantDraw, Op, Rec

pytestmark = pytest.mark.filterwarnings(
    "ignore:Api key is used with an insecure connection:UserWarning"
)

# Reads that show records (by id, by words, by filter, through MCP), and the grant routes.
KINDS = ("recall", "recall", "get", "count", "scroll", "mcp", "propositions", *GRANT_KINDS)
STORE_SETTINGS = {"edge": {}, "server": {"WHOSE_DECIDE_SHAPES": "false"}}


def test_grants_and_records_the_asker_may_not_see_change_nothing_observed(
    stores: Stores, store_backend: Backend
) -> None:
    plan = replace(profiles.plan(), op_kinds=KINDS, grants=True)

    @profiles.hypothesis_settings(profiles.grant_examples())
    @given(case=cases(plan))
    def run(case: Case) -> None:
        try:
            check(stores, case)
        except WorldDiverged:
            reject()

    run()


def _appointment(seed: int, holder: str, audience: tuple[str, ...], hidden: bool) -> Rec:
    return Rec(
        seed=seed,
        holder=holder,
        key="k0",
        value=seed,
        modality="believed",
        audience=audience,
        valid_at="2026-01-01T00:00:00Z",
        categories=("appointments",),
        hidden_by="audience" if hidden else None,
    )


def test_the_harness_fails_when_a_live_grant_reveals_the_extra_record(stores: Stores) -> None:
    """Honesty: alice's grant to bob of her appointments, in force, shows bob her
    extra record in B: the comparison must fail. Drawn to end, it shows nothing."""
    mine = _appointment(1, "bob", ("bob",), hidden=False)
    extra = _appointment(2, "alice", ("alice",), hidden=True)
    recall = Op("recall", {"query": "claim", "audience": [], "limit": 10})
    live = GrantDraw("alice", "bob", ("appointments",))
    case = Case(Asker("bob"), (mine,), ((0, extra),), (recall,), grants=(live,))
    with pytest.raises(NoninterferenceViolated, match="recall"):
        check(stores, case, verify_hidden=False)
    # The generator's view agrees: such a record is not hidden, and is refused as one.
    with pytest.raises(AssertionError, match="generator bug"):
        check(stores, case)
    ended = replace(case, grants=(replace(live, ends=True),))
    check(stores, ended)
