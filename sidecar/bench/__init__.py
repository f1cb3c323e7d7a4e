"""`whose bench`: benchmarks of a served sidecar, outside the runtime import path.

Nothing in the sidecar imports this package; only the `bench` command does, lazily.
It needs the `bench` extra (`pip install 'whose[bench]'`): the HTTP load client and
the plotting library, which a deployment does not carry.

- corpus.py: the sweep's clustered vectors and askers of each readable fraction;
- dataset.py: the text dataset of mixed allow rates (scale-out run, bench/ scripts);
- processes.py: the sidecar, the passthrough, Qdrant and Redis, served on loopback;
- passthrough.py: the plain-store baseline;
- peer.py: wardowl, the peer library, served on the same engine and data;
- measure.py: latency, throughput, CPU, the sidecar's own histograms;
- sweep.py: the readable-fraction sweep (bench.json, bench.png);
- scale.py: the scale-out run (scale.json);
- report.py: tables and the plot;
- conversations.py: two-person conversations (the retrieval benchmark's data);
- rooms.py: multi-party conversations with joins and leaves (bench/rooms.py).
"""

from __future__ import annotations

# The extra's distributions, by the top-level module each installs.
EXTRA_MODULES = frozenset({"httpx", "matplotlib", "wardowl"})


def missing_extra(exc: ImportError) -> bool:
    """Whether an import failed for want of the `bench` extra (and not for a fault of
    our own, which must surface as itself)."""
    name = (exc.name or "").partition(".")[0]
    return isinstance(exc, ModuleNotFoundError) and name in EXTRA_MODULES
