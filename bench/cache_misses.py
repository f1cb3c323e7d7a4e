"""Decision-cache lookups per 100 recalls in each cell of `whose bench` (served).

    .venv/bin/python bench/cache_misses.py [--records 10000] [--queries 100]

Loads the bench's corpus into one sidecar on embedded defaults, then, cell by cell
(each cell's asker is another person, so starts with nothing cached), sends
`--queries` recalls one at a time and prints the change in the sidecar's
`whose_decision_cache_total` (hit, miss, bypass: per record looked up).
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sidecar.bench.corpus import asker, build, cells, headers, load  # noqa: E402
from sidecar.bench.processes import sidecar  # noqa: E402

RESULTS = ("hit", "miss", "bypass")


def lookups(ops: str) -> dict[str, float]:
    text = httpx.get(f"{ops}/metrics").text
    found = {}
    for result in RESULTS:
        m = re.search(rf'whose_decision_cache_total\{{result="{result}"\}} ([0-9.e+]+)', text)
        found[result] = float(m.group(1)) if m else 0.0
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    corpus = build(args.records, args.queries)
    work = Path(tempfile.mkdtemp(prefix="whose-misses-"))
    try:
        with sidecar(work / "data") as served, httpx.Client(timeout=60) as http:
            load(served.base, corpus)
            for layout, fraction in cells():
                who = asker(layout, fraction)
                before = lookups(served.ops)
                for i in range(args.queries):
                    body = {"vector": corpus.queries[i].tolist(), "limit": 10}
                    http.post(
                        f"{served.base}/v1/recall", json=body, headers=headers(who)
                    ).raise_for_status()
                after = lookups(served.ops)
                per_100 = {r: round((after[r] - before[r]) * 100 / args.queries) for r in RESULTS}
                print(f"{fraction:.0%} {layout}: {per_100}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
