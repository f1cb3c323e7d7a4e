"""A text search's scores come from what the asker may see, whatever the store's filter.

The store filter of a search (the pushdown) equals "what the asker and the audience may
see" only while the policy's denials are all expressed in `whose.lib.visibility.visible_to`
and pushdown is on. A security team may add a denial of its own (here: records below a
confidence are withheld), and an operator may turn pushdown off (WHOSE_PUSHDOWN=false):
then records the asker may not see are candidates of the search, which the policy then
withholds. They must still shape nothing the asker is shown: a record's lexical score
(BM25) may depend on the record and the query only, never on which other records the
search's filter admits (store/hybrid.py).

Each test builds the same small world in stores A and B, plus, in B only, records that
contain the query's words and that the asker may not see, and compares the text recalls
(hybrid, lexical, the MCP tool) and a Qdrant query of both stores: items, scores and
order must be identical (harness.check). Each failed on main, whose BM25 weighed a term
by its document frequency within the search's filter.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from tests.conftest import Backend
from tests.noninterference.harness import Stores, TenantPool, check, prepare_policy, start_stores
from tests.noninterference.world import Asker, Case, Op, Rec, Ref

pytestmark = pytest.mark.filterwarnings(
    "ignore:Api key is used with an insecure connection:UserWarning"
)

# A denial outside `visible_to`, as a security team would add one (a rule in the
# denials package needs no registration): the pushdown filter does not know it.
LOW_CONFIDENCE = """\
package whose.disclosure.denials

import data.whose.disclosure

# METADATA
# description: claims held with little confidence are not disclosed to anyone.
low_confidence[record.id] contains "below_disclosure_confidence" if {
\tsome record in disclosure.records
\trecord.confidence < 0.5
}
"""

JAN, FEB = "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z"
ASKER = Asker("bob")

# What bob may see: claims on k0 and k1 ("claim <seed> on <key> is <value>"), in three
# chains, shown to him.
SHARED = (
    Rec(1, "alice", "k0", 1, "believed", ("alice", "bob"), JAN),
    Rec(2, "bob", "k1", 2, "believed", ("bob",), JAN),
    Rec(3, "carol", "k0", 0, "asserted", ("group:team",), FEB),
    Rec(4, "alice", "k1", 0, "believed", ("alice", "bob"), FEB),
)
# In store B only: claims on k0 by dave and eve (of their own, and of carol's mind),
# each the one version of its chain; how bob is kept from them is the variant's.
EXTRA = tuple(
    Rec(10 + n, holder, "k0", n % 3, "believed", ("bob", holder), JAN, about=about)
    for n, (holder, about) in enumerate(
        (("dave", None), ("eve", None), ("dave", "carol"), ("eve", "carol"))
    )
)

QUERY = "claim on k0"
OPS = (
    Op("recall", {"query": QUERY, "audience": [], "limit": 10}),
    Op("recall", {"query": QUERY, "search": "lexical", "audience": [], "limit": 10}),
    Op("recall", {"query": QUERY, "audience": [], "limit": 2}),
    Op("mcp", {"tool": "recall", "query": QUERY, "audience": (), "limit": 10}),
    Op("query", {"vector_seed": 3, "filter": None, "limit": 5}),
    # That the extra records are hidden is itself compared: missing in A, withheld in B.
    Op("get", {"ref": Ref("hidden", 0)}),
    Op("get", {"ref": Ref("hidden", 3)}),
)


@pytest.fixture(scope="module", params=["pushdown off", "a denial outside visible_to"])
def variant(
    request: pytest.FixtureRequest,
    store_backend: Backend,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, Stores]]:
    """Stores A and B with pushdown off (the policy as shipped), or with the policy plus
    LOW_CONFIDENCE (pushdown on)."""
    folder = tmp_path_factory.mktemp("text-scores")
    policy = prepare_policy(folder / "rego", 8)
    settings: dict[str, str] = {}
    if request.param == "pushdown off":
        settings["WHOSE_PUSHDOWN"] = "false"
    else:
        (policy / "whose" / "disclosure" / "denials" / "low_confidence.rego").write_text(
            LOW_CONFIDENCE
        )
    for stores in start_stores(folder, policy, TenantPool(8), store_backend, settings):
        yield request.param, stores


def hidden_records(how: str) -> tuple[tuple[int, Rec], ...]:
    if how == "pushdown off":
        # Kept out by their audience, which the policy checks and the store does not.
        extra = [replace(r, audience=(r.holder or "dave",), hidden_by="audience") for r in EXTRA]
    else:
        # Shown to bob, but withheld by the security team's rule.
        extra = [replace(r, confidence=0.3) for r in EXTRA]
    return tuple((0, r) for r in extra)


def test_records_the_asker_may_not_see_change_no_score_of_a_text_search(
    variant: tuple[str, Stores],
) -> None:
    how, stores = variant
    case = Case(ASKER, SHARED, hidden_records(how), OPS)
    # The extra records' being hidden is checked by the `get`s above (a visible one
    # would answer 200 in B), not by the world's model of visibility, which knows
    # nothing of the added rule.
    checked = check(stores, case, verify_hidden=how == "pushdown off", all_stored=True)
    assert checked.hidden_stored == len(EXTRA)
