"""The sweep's and the scale-out run's figures: Markdown tables (what docs/operations.md
shows), whose beside its peer, and the sweep's plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def sweep_table(result: dict[str, Any]) -> str:
    """One row per cell, and per configuration when the run measured several
    (`whose bench --variant`), each against the passthrough of the same cell."""
    several = any(len(run.get("variants", {})) > 1 for run in result["runs"])
    lines = [
        "| records | readable | layout |"
        + (" configuration |" if several else "")
        + " recall p50 / p99 | passthrough p50 / p99 "
        "| p50 ratio | rps at 8 in flight (passthrough) | throughput ratio "
        "| recall@10 (passthrough) | sidecar's own / store / policy / HTTP ms "
        "| CPU ms per request: sidecar + OPA |",
        "|---|---|---|" + ("---|" if several else "") + "---|---|---|---|---|---|---|---|",
    ]
    for run in result["runs"]:
        names = list(run.get("variants", {"whose": {}}))
        for cell in run["cells"].values():
            plain = cell["passthrough"]
            for name in names:
                whose = cell[name]
                ratios = cell.get("ratios_by_variant", {}).get(name, cell["ratios"])
                spent, tp = whose["where_time_goes_ms"], whose["throughput"]
                lines.append(
                    f"| {run['records']:,} | {cell['fraction']:.0%} | {cell['layout']} "
                    + (f"| {name} " if several else "")
                    + f"| {whose['p50_ms']:.1f} / {whose['p99_ms']:.1f} ms "
                    f"| {plain['p50_ms']:.1f} / {plain['p99_ms']:.1f} ms | {ratios['p50']:.2f} "
                    f"| {tp['rps']:.0f} ({plain['throughput']['rps']:.0f}) "
                    f"| {ratios['throughput']:.2f} "
                    f"| {whose['recall_at_10']['mean']:.3f} "
                    f"({plain['recall_at_10']['mean']:.3f}) "
                    f"| {spent['sidecar_own']:.1f} / {spent['store_calls']:.1f} / "
                    f"{spent['policy_calls']:.1f} / {spent['http_and_client']:.1f} "
                    f"| {tp['cpu_ms_sidecar_own']:.1f} + {tp['cpu_ms_sidecar_children']:.1f} |"
                )
    return "\n".join(lines)


def peer_table(result: dict[str, Any]) -> str:
    """whose beside wardowl (peer.py), cell by cell of one run: latency one at a time,
    throughput and the server's CPU per recall at 8 in flight, recall@10 and leaks, and
    whose's ratios to the peer and to its own plain-store passthrough."""
    lines = [
        "| records | readable | layout | p50 / p99 ms: whose | peer | passthrough "
        "| p50 ratio to peer (to passthrough) | rps at 8 in flight: whose | peer "
        "| server CPU ms per recall: whose | peer | recall@10: whose | peer "
        "| leaks: whose | peer |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in result["runs"]:
        for cell in run["cells"].values():
            if "peer" not in cell:
                continue
            whose, rival, plain = cell["whose"], cell["peer"], cell["passthrough"]
            mine, theirs = whose["throughput"], rival["throughput"]
            lines.append(
                f"| {run['records']:,} | {cell['fraction']:.0%} | {cell['layout']} "
                f"| {whose['p50_ms']:.1f} / {whose['p99_ms']:.1f} "
                f"| {rival['p50_ms']:.1f} / {rival['p99_ms']:.1f} "
                f"| {plain['p50_ms']:.1f} / {plain['p99_ms']:.1f} "
                f"| {cell['ratios_to_peer']['p50']:.2f} ({cell['ratios']['p50']:.2f}) "
                f"| {mine['rps']:.0f} | {theirs['rps']:.0f} "
                f"| {mine['cpu_ms_sidecar']:.1f} | {theirs['cpu_ms_peer']:.1f} "
                f"| {whose['recall_at_10']['mean']:.3f} | {rival['recall_at_10']['mean']:.3f} "
                f"| {whose['recall_at_10']['leaks']} | {rival['recall_at_10']['leaks']} |"
            )
    return "\n".join(lines)


def dialect_table(result: dict[str, Any]) -> str:
    """The drop-in path (dialect.py): a stack collection through the sidecar's Qdrant
    dialect beside the same query on Qdrant directly, cell by cell."""
    lines = [
        "| records | readable | layout | p50 / p99 ms: sidecar | Qdrant directly | p50 ratio "
        "| rps at 8 in flight: sidecar | Qdrant | CPU ms per query: sidecar + Qdrant | Qdrant "
        "| recall@10: sidecar | Qdrant | leaks: sidecar | Qdrant |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in result["runs"]:
        for cell in run.get("dialect", {}).values():
            mine, theirs = cell["sidecar"], cell["direct"]
            tp, direct_tp = mine["throughput"], theirs["throughput"]
            lines.append(
                f"| {run['records']:,} | {cell['fraction']:.0%} | {cell['layout']} "
                f"| {mine['p50_ms']:.1f} / {mine['p99_ms']:.1f} "
                f"| {theirs['p50_ms']:.1f} / {theirs['p99_ms']:.1f} | {cell['p50_ratio']:.2f} "
                f"| {tp['rps']:.0f} | {direct_tp['rps']:.0f} "
                f"| {tp['cpu_ms_sidecar']:.1f} + {tp['cpu_ms_qdrant']:.1f} "
                f"| {direct_tp['cpu_ms_qdrant']:.1f} "
                f"| {mine['recall_at_10']['mean']:.3f} | {theirs['recall_at_10']['mean']:.3f} "
                f"| {mine['recall_at_10']['leaks']} | {theirs['recall_at_10']['leaks']} |"
            )
    return "\n".join(lines)


# What the plot draws for each system a cell measured: (key, marker, label).
_SYSTEMS = (("whose", "o", "whose"), ("peer", "s", "wardowl"), ("passthrough", "x", "passthrough"))


def plot(runs: list[dict[str, Any]], path: Path) -> None:
    """Per size and layout, against the readable fraction, for whose, the peer (when
    measured) and the passthrough: recall p50, throughput at 8 in flight, recall@10."""
    fig, (latency, throughput, quality) = plt.subplots(1, 3, figsize=(16, 4.5))
    for run in runs:
        for layout, style in (("far", "-"), ("random", "--")):
            cells = sorted(
                (c for c in run["cells"].values() if c["layout"] == layout),
                key=lambda c: c["fraction"],
            )
            fractions = [c["fraction"] * 100 for c in cells]
            for key, marker, name in _SYSTEMS:
                if not all(key in c for c in cells):
                    continue
                label = f"{name}, {run['records']:,}, {layout}"
                measured = [c[key] for c in cells]
                drawn = marker + style
                latency.plot(fractions, [m["p50_ms"] for m in measured], drawn, label=label)
                rps = [m["throughput"]["rps"] for m in measured]
                throughput.plot(fractions, rps, drawn, label=label)
                found = [m["recall_at_10"]["mean"] for m in measured]
                quality.plot(fractions, found, drawn, label=label)
    latency.set(xlabel="readable (%)", ylabel="recall p50 (ms)", title="latency vs readable share")
    throughput.set(xlabel="readable (%)", ylabel="recalls per second", title="8 in flight")
    quality.set(xlabel="readable (%)", ylabel="recall@10", title="recall@10 of permitted records")
    latency.set_ylim(bottom=0)
    throughput.set_ylim(bottom=0)
    quality.set_ylim(0.5, 1.01)
    for axes in (latency, throughput, quality):
        axes.set_xscale("log")
        axes.legend(fontsize="x-small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def scale_table(result: dict[str, Any]) -> str:
    """The scale-out run's figures (scale.py)."""
    lines = [
        "| records | configuration | recall p50 / p99 (1 at a time) | rps at 8 / 32 in flight "
        "| p99 at 32 | CPU ms per request at 32: sidecar + Qdrant (+ client) |",
        "|---|---|---|---|---|---|",
    ]
    for run in result["runs"]:
        for name, c in run["configs"].items():
            one, eight, many = c["one_at_a_time"], c["in_flight_8"], c["in_flight_32"]
            own = many.get("cpu_ms_sidecar", many.get("cpu_ms_passthrough", 0.0))
            lines.append(
                f"| {run['records']:,} | {name} | {one['p50_ms']:.1f} / {one['p99_ms']:.1f} ms "
                f"| {eight['rps']:.0f} / {many['rps']:.0f} | {many['p99_ms']:.0f} ms "
                f"| {own:.1f} + {many.get('cpu_ms_qdrant', 0.0):.1f} "
                f"(+ {many['cpu_ms_client']:.1f}) |"
                + (f" not 200 at 32: {many['not_200']}" if "not_200" in many else "")
            )
    return "\n".join(lines)
