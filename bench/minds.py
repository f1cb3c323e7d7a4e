"""What minds of any depth cost: a 16-witness event written, and a depth-4 question
read, against today's pairwise records, two versions side by side in one run.

    .venv/bin/python bench/minds.py [--old main] [--new worktree] [--events 20]
                                    [--reads 50]

Each version (a git ref, extracted with `git archive`, or `worktree`: this checkout as
it is) is served by `whose serve --dev` on embedded defaults with its own OPA and its
own store, both at once. The story: 16 people witness `--events` events on one
proposition together (`POST /v1/witnessed`), the versions taking turns request by
request so that load from elsewhere falls on both alike; then p0 asks, in turns too,
where p1 thinks it is (depth 1, one mind after the observer: `observed: "p1"`, today's
pairwise record) and where p1 thinks p2 thinks p3 thinks p4 thinks it is (depth 4:
`observed: [p1, p2, p3, p4]`). The older version stores a witness's view of each other
witness (N + N(N-1) records an event) and cannot be asked a chain (422); the newer
stores one record a witness and derives the views when asked. Medians and their ratios
(new / old; a depth-4 read against the old depth-1 read) are what to compare; it writes
bench/results/minds.json.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from sidecar.bench.processes import free_ports

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "bench" / "results"
WITNESSES = [f"p{i}" for i in range(16)]
KEY = "marble.location"
HEADERS = {"X-Whose-Tenant": "acme"}
READY_TIMEOUT_S = 120


def checkout(ref: str, into: Path) -> Path:
    """The source tree of `ref` (this checkout itself for `worktree`)."""
    if ref == "worktree":
        return REPO
    tree = into / ref.replace("/", "_")
    tree.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", ref], check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tree, filter="data")
    return tree


class Served:
    """One version's sidecar: `whose serve --dev` from its tree, with its own store."""

    def __init__(self, name: str, tree: Path, data: Path) -> None:
        self.name = name
        port, ops = free_ports(2)
        self.base = f"http://127.0.0.1:{port}"
        command = [sys.executable, "-m", "sidecar", "serve", "--dev", "--port", str(port)]
        command += ["--ops-port", str(ops), "--data-dir", str(data)]
        # The tree's own package and policies first, not the ones installed in the venv.
        env = {
            **os.environ,
            "PYTHONPATH": str(tree),
            "WHOSE_POLICY_DIR": str(tree / "rego"),
            "WHOSE_OPA_BINARY": str(REPO / "bin" / "opa"),
            "WHOSE_LOG_LEVEL": "WARNING",
        }
        data.mkdir(parents=True)
        self.log = (data / "sidecar.log").open("wb")
        self.process = subprocess.Popen(
            command, cwd=tree, env=env, stdout=self.log, stderr=subprocess.STDOUT
        )
        self.http = httpx.Client(base_url=self.base, timeout=60)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"{name} exited; see {data / 'sidecar.log'}")
            try:
                if httpx.get(f"http://127.0.0.1:{ops}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} not ready after {READY_TIMEOUT_S}s")
            time.sleep(0.5)

    def timed(self, method: str, path: str, **kwargs: Any) -> tuple[float, httpx.Response]:
        started = time.perf_counter()
        response = self.http.request(method, path, **kwargs)
        return (time.perf_counter() - started) * 1000, response

    def close(self) -> None:
        self.http.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def event(n: int) -> dict[str, Any]:
    where = f"place-{n}"
    return {
        "proposition": {"text": f"the marble is in {where}", "key": KEY, "value": where},
        "witnessed_by": WITNESSES,
        "at": f"2026-03-01T{10 + n // 60:02d}:{n % 60:02d}:00Z",
        "source_id": "room",
    }


def as_(who: str, **extra: str) -> dict[str, str]:
    return HEADERS | {"X-Whose-Asker": who} | extra


def recall(observed: Any) -> dict[str, Any]:
    return {"query": "where is the marble?", "about": KEY, "observer": "p0", "observed": observed}


def run(old: Served, new: Served, events: int, reads: int) -> dict[str, Any]:
    both = (old, new)
    writes: dict[str, list[float]] = {s.name: [] for s in both}
    records: dict[str, int] = {s.name: 0 for s in both}
    relay = as_("extractor-bot", **{"X-Whose-Roles": "extractor"})
    for n in range(events):
        for served in both if n % 2 else reversed(both):
            ms, response = served.timed("POST", "/v1/witnessed", json=event(n), headers=relay)
            assert response.status_code == 201, (served.name, response.text)
            writes[served.name].append(ms)
            records[served.name] += len(response.json()["records"])
    questions = {"depth 1 (observed: p1)": "p1", "depth 4 (observed: p1..p4)": WITNESSES[1:5]}
    read: dict[str, dict[str, Any]] = {}
    last = f"place-{events - 1}"
    for label, observed in questions.items():
        for served in both:
            read.setdefault(label, {})[served.name] = {"ms": [], "status": None, "values": None}
        for n in range(reads):
            for served in both if n % 2 else reversed(both):
                ms, response = served.timed(
                    "POST", "/v1/recall", json=recall(observed), headers=as_("p0")
                )
                seen = read[label][served.name]
                seen["status"] = response.status_code
                if response.status_code == 200:
                    seen["ms"].append(ms)
                    seen["values"] = [i["proposition"]["value"] for i in response.json()["items"]]
    summary: dict[str, Any] = {
        "events": events,
        "witnesses": len(WITNESSES),
        "reads": reads,
        "write": {
            s.name: {
                "records_per_event": records[s.name] / events,
                "median_ms": statistics.median(writes[s.name]),
            }
            for s in both
        },
        "read": {},
    }
    summary["write"]["ratio_new_over_old"] = (
        summary["write"]["new"]["median_ms"] / summary["write"]["old"]["median_ms"]
    )
    baseline = read["depth 1 (observed: p1)"]["old"]
    for label, by in read.items():
        summary["read"][label] = {
            name: {
                "status": seen["status"],
                "median_ms": statistics.median(seen["ms"]) if seen["ms"] else None,
                "answer": seen["values"],
            }
            for name, seen in by.items()
        }
        if by["new"]["ms"] and baseline["ms"]:
            summary["read"][label]["ratio_new_over_old_depth_1"] = statistics.median(
                by["new"]["ms"]
            ) / statistics.median(baseline["ms"])
    summary["expected_answer"] = last
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", default="main", help="git ref of the baseline")
    parser.add_argument("--new", default="worktree", help="git ref, or worktree")
    parser.add_argument("--events", type=int, default=20)
    parser.add_argument("--reads", type=int, default=50)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="whose-minds-"))
    servers: list[Served] = []
    try:
        trees = {"old": checkout(args.old, scratch / "trees"), "new": checkout(args.new, scratch)}
        for name in ("old", "new"):
            servers.append(Served(name, trees[name], scratch / f"data-{name}"))
        old, new = servers
        summary = run(old, new, events=args.events, reads=args.reads)
    finally:
        for served in servers:
            served.close()
        shutil.rmtree(scratch, ignore_errors=True)
    summary["versions"] = {"old": args.old, "new": args.new}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "minds.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
