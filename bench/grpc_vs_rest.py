"""Qdrant's gRPC API against its REST API, both through the sidecar: one run, medians
and their ratios, for a batch upsert and a search (issue 41, docs/operations.md).

    .venv/bin/python bench/grpc_vs_rest.py [--batches 20] [--batch 64] [--dim 384] [--queries 200]

Starts `whose serve` (embedded defaults: the edge store, OPA linked in) with its gRPC
listener on a free port and a key, and makes two unmodified qdrant-clients for alice,
one with `prefer_grpc=True`, each with a stack collection of its own (same layout).
Then, interleaved so load on the machine falls on both alike: `--batches` upserts of
`--batch` LangChain-shaped documents (`dim`-dimension vectors, readable by alice and
bob) through each, and `--queries` nearest-neighbour queries (limit 10, with payload)
as bob through each. Each call is one request from one client. This is a benchmark,
not a test: it prints medians and p99 and writes bench/results/grpc_vs_rest.json.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from qdrant_client import QdrantClient  # noqa: E402
from qdrant_client.http import models as qm  # noqa: E402

from tests.acceptance.proxy_world import JWT_ENV, token  # noqa: E402
from tests.conftest import GRPC  # noqa: E402
from tests.factories import served  # noqa: E402

warnings.filterwarnings("ignore", "Api key is used with an insecure connection")


def client(base: str, who: str, grpc: bool) -> QdrantClient:
    return QdrantClient(
        url=base,
        grpc_port=GRPC[base],
        prefer_grpc=grpc,
        api_key=token(who),
        check_compatibility=False,
        timeout=60,
    )


def documents(rng: random.Random, start: int, count: int, dim: int) -> list[qm.PointStruct]:
    return [
        qm.PointStruct(
            id=start + i,
            vector=[rng.gauss(0, 1) for _ in range(dim)],
            payload={
                "page_content": f"note {start + i} about the launch",
                "metadata": {"audience": ["alice", "bob"], "source": f"doc-{i % 7}.md"},
            },
        )
        for i in range(count)
    ]


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median_ms": round(statistics.median(ordered) * 1000, 2),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 2),
        "n": len(ordered),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    rng = random.Random(41)
    timings: dict[str, list[float]] = {k: [] for k in ("upsert_rest", "upsert_grpc")}
    timings |= {"search_rest": [], "search_grpc": []}
    with (
        tempfile.TemporaryDirectory() as folder,
        served(Path(folder), JWT_ENV, dev=False, grpc=True) as base,
    ):
        writers = {"rest": client(base, "alice", False), "grpc": client(base, "alice", True)}
        readers = {"rest": client(base, "bob", False), "grpc": client(base, "bob", True)}
        config = qm.VectorParams(size=args.dim, distance=qm.Distance.COSINE)
        for kind, writer in writers.items():
            writer.create_collection(f"kb-{kind}", vectors_config=config)
        for b in range(args.batches):
            batch = documents(rng, b * args.batch + 1, args.batch, args.dim)
            for kind, writer in writers.items():
                started = time.perf_counter()
                writer.upsert(f"kb-{kind}", batch, wait=True)
                timings[f"upsert_{kind}"].append(time.perf_counter() - started)
        for _ in range(args.queries):
            query = [rng.gauss(0, 1) for _ in range(args.dim)]
            for kind, reader in readers.items():
                started = time.perf_counter()
                found = reader.query_points(f"kb-{kind}", query, limit=10, with_payload=True)
                timings[f"search_{kind}"].append(time.perf_counter() - started)
                assert len(found.points) == 10
    result: dict[str, Any] = {"arguments": vars(args)}
    result |= {k: summary(v) for k, v in timings.items()}
    for what in ("upsert", "search"):
        ratio = result[f"{what}_grpc"]["median_ms"] / result[f"{what}_rest"]["median_ms"]
        result[f"{what}_grpc_over_rest"] = round(ratio, 2)
    out = REPO / "bench" / "results" / "grpc_vs_rest.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
