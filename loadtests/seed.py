"""Seed a sidecar with a dataset through its own API, each record written by the right writer.

    .venv/bin/python -m loadtests.seed --host http://127.0.0.1:8080 --records 300 \
        [--seed 7] [--ids-out loadtests/results/seed-ids.json]

The records are bench/recall_http.py's dataset: beliefs of alice, bob and carol (and of
`dave`, whom the directory does not know) over 50 topic keys, with audiences that give
alice, carol and bob read access to about 90 %, 50 % and 10 % of them. Records of one holder
about one key form a supersession chain, so history has depth. Each record is written by its
holder (speaker == observer, the write policy's plain case); in bearer mode a holder without a
token is written by the extractor (relay role), which the policy also allows. Records get no
`valid_at` (the sidecar stamps the time they are stored), so seeding again, or after a load
run, extends the chains instead of being refused as older than their current versions.

`--ids-out` writes the stored ids as JSON; the locustfile reads it (`WHOSE_LOAD_IDS_FILE`)
as its pool for GET by id, where a record the asker may not see answers 404, and takes the
`hidden` ones (no asker of the mix is in their audience: dave's) for `get_hidden`, which
must answer 404 every time.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.recall_http import dataset  # noqa: E402
from loadtests.identities import Identities, from_env  # noqa: E402

BATCH = 200


def writer_for(record: dict[str, Any], identities: Identities) -> str:
    holder = str(record["observer_id"])
    return holder if identities.can_act_as(holder) else identities.extractor


def hidden_from_all(record: dict[str, Any], identities: Identities) -> bool:
    """No asker of the mix is in the audience, by name or through a group."""
    audience = set(record.get("audience") or [])
    return not audience & {*identities.askers, identities.group}


def seed(
    host: str, records: list[dict[str, Any]], identities: Identities
) -> tuple[list[str], list[str]]:
    """Write the records, grouped by writer and batched.

    Returns every stored id, and the ids of records no asker of the mix may read.
    """
    ids: list[str] = []
    hidden: list[str] = []
    with httpx.Client(base_url=host, timeout=120) as http:
        for start in range(0, len(records), BATCH):
            by_writer: dict[str, list[dict[str, Any]]] = {}
            for record in records[start : start + BATCH]:
                by_writer.setdefault(writer_for(record, identities), []).append(record)
            for writer, mine in by_writer.items():
                response = http.post("/v1/memories", json=mine, headers=identities.headers(writer))
                if response.status_code != 201:
                    raise SystemExit(
                        f"seeding as {writer} failed: {response.status_code} {response.text[:500]}"
                    )
                for stored in response.json()["records"]:
                    ids.append(str(stored["id"]))
                    if hidden_from_all(stored, identities):
                        hidden.append(str(stored["id"]))
    return ids, hidden


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", required=True, help="the sidecar's base URL")
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7, help="dataset random seed")
    parser.add_argument("--ids-out", type=Path, help="write the stored ids here (JSON)")
    args = parser.parse_args(argv)
    if not 1 <= args.records <= 100_000:
        parser.error("--records must be 1..100000")
    identities = from_env()
    if identities.mode == "bearer" and not identities.can_act_as(identities.extractor):
        identities.check()
    records = dataset(args.records, random.Random(args.seed))
    for record in records:
        # The sidecar stamps store time instead: a fixed valid_at would be refused
        # (valid_at_before_current_version) once a load run has written newer versions.
        record.pop("valid_at", None)
    started = time.perf_counter()
    ids, hidden = seed(args.host.rstrip("/"), records, identities)
    elapsed = time.perf_counter() - started
    if args.ids_out:
        args.ids_out.parent.mkdir(parents=True, exist_ok=True)
        args.ids_out.write_text(
            json.dumps({"host": args.host, "ids": ids, "hidden": hidden}) + "\n"
        )
    print(
        f"seeded {len(ids)} records ({len(hidden)} hidden from every asker) "
        f"in {elapsed:.1f}s ({identities.mode} identity)"
    )


if __name__ == "__main__":
    main()
