"""The sweep's and the scale-out run's figures: Markdown tables (what docs/operations.md
shows) and the sweep's plot."""

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


def plot(runs: list[dict[str, Any]], path: Path) -> None:
    """Per size and layout, against the readable fraction: recall p50 of whose and of
    the passthrough, and whose's recall@10."""
    fig, (latency, quality) = plt.subplots(1, 2, figsize=(11, 4))
    for run in runs:
        for layout, style in (("far", "-"), ("random", "--")):
            cells = sorted(
                (c for c in run["cells"].values() if c["layout"] == layout),
                key=lambda c: c["fraction"],
            )
            fractions = [c["fraction"] * 100 for c in cells]
            label = f"{run['records']:,}, {layout}"
            latency.plot(fractions, [c["whose"]["p50_ms"] for c in cells], "o" + style, label=label)
            latency.plot(
                fractions,
                [c["passthrough"]["p50_ms"] for c in cells],
                "x" + style,
                label=f"{label}: passthrough",
                alpha=0.6,
            )
            quality.plot(
                fractions,
                [c["whose"]["recall_at_10"]["mean"] for c in cells],
                "o" + style,
                label=label,
            )
    latency.set(xlabel="readable (%)", ylabel="recall p50 (ms)", title="latency vs readable share")
    latency.set_ylim(bottom=0)
    quality.set(xlabel="readable (%)", ylabel="recall@10", title="recall@10 of permitted records")
    quality.set_ylim(0.8, 1.01)
    for axes in (latency, quality):
        axes.set_xscale("log")
        axes.legend(fontsize="small")
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
