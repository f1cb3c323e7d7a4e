"""Run the locust mix headless, then write summary.json beside locust's CSV and HTML.

    .venv/bin/python -m loadtests.run --host http://127.0.0.1:8080 --users 4 --rate 2 \
        --duration 30s [--seed-records 500] [--out loadtests/results/NAME]

`--rate R` is the fixed-rate (open) mode: each user is paced at R requests per second
(locust's `constant_throughput`), so the offered rate is users * R whatever the latency;
`--rate 0` sends back to back (closed model, for peak throughput). Outputs in `--out`
(default `loadtests/results/<UTC time>/`): `locust_stats.csv`, `locust_stats_history.csv`,
`locust_failures.csv`, `locust_exceptions.csv`, `report.html`, `mix.json` (requests and
statuses per task) and `summary.json` (offered vs achieved rate, failures, client latency per
route, server-side p50/p99 from /metrics). Exit status 1 when any request failed.

Only loopback hosts are accepted unless `--allow-remote` is given (a deployed sidecar).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from loadtests import summary  # noqa: E402

LOCUSTFILE = REPO / "loadtests" / "locustfile.py"
RESULTS = REPO / "loadtests" / "results"
MAX_DURATION_S = 3600


def seconds(text: str) -> int:
    """`90`, `30s`, `2m`, `1h30m` -> seconds (locust's own --run-time syntax)."""
    parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s?)?", text.strip())
    if not text.strip() or parts is None:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r}")
    h, m, s = (int(p or 0) for p in parts.groups())
    total = 3600 * h + 60 * m + s
    if not 1 <= total <= MAX_DURATION_S:
        raise argparse.ArgumentTypeError(f"duration must be 1s..{MAX_DURATION_S}s")
    return total


def is_loopback(host: str) -> bool:
    name = urlsplit(host).hostname or ""
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _ops_of(host: str) -> str:
    """The operations listener beside an API address (docs/operations.md: WHOSE_OPS_PORT)."""
    parts = urlsplit(host)
    return f"{parts.scheme}://{parts.hostname}:9180"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="http://127.0.0.1:8080")
    parser.add_argument(
        "--ops",
        help="the sidecar's operations listener, for /metrics (default: --host's host, port 9180)",
    )
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--rate", type=float, default=2.0, help="requests/s per user; 0: closed")
    parser.add_argument("--duration", type=seconds, default=seconds("30s"))
    parser.add_argument("--out", type=Path, help="results folder")
    parser.add_argument("--seed-records", type=int, default=0, help="seed this many first")
    parser.add_argument("--ids-file", type=Path, help="ids for GET (from loadtests.seed)")
    parser.add_argument("--allow-remote", action="store_true", help="allow a non-loopback host")
    args = parser.parse_args(argv)
    host = args.host.rstrip("/")
    if not is_loopback(host) and not args.allow_remote:
        parser.error(f"{host} is not a loopback address: pass --allow-remote to load it")
    if not 1 <= args.users <= 1000 or args.rate < 0:
        parser.error("--users must be 1..1000 and --rate >= 0")
    out = args.out or RESULTS / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out.mkdir(parents=True, exist_ok=True)

    ids_file = args.ids_file
    if args.seed_records:
        ids_file = out / "seed-ids.json"
        seed = [sys.executable, "-m", "loadtests.seed", "--host", host]
        seed += ["--records", str(args.seed_records), "--ids-out", str(ids_file)]
        subprocess.run(seed, check=True, cwd=REPO, timeout=600)

    env = {
        **os.environ,
        "WHOSE_LOAD_RATE": str(args.rate),
        "WHOSE_LOAD_MIX_OUT": str(out / "mix.json"),
    }
    if ids_file:
        env["WHOSE_LOAD_IDS_FILE"] = str(ids_file)
    command = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless"]
    command += ["--host", host, "--users", str(args.users), "--spawn-rate", str(args.users)]
    command += ["--run-time", f"{args.duration}s", "--stop-timeout", "5", "--only-summary"]
    command += ["--csv", str(out / "locust"), "--html", str(out / "report.html")]
    command += ["--loglevel", "WARNING"]

    ops = (args.ops or _ops_of(host)).rstrip("/")
    before = summary.scrape(ops)
    started = time.monotonic()
    finished = subprocess.run(command, cwd=REPO, env=env, timeout=args.duration + 120)
    elapsed = time.monotonic() - started
    after = summary.scrape(ops)

    mix_file = out / "mix.json"
    report = summary.summarize(
        host=host,
        users=args.users,
        rate_per_user=args.rate,
        duration_s=args.duration,
        stats_csv=out / "locust_stats.csv",
        history_csv=out / "locust_stats_history.csv",
        mix=json.loads(mix_file.read_text()) if mix_file.exists() else None,
        before=before,
        after=after,
    )
    report["wall_s"] = round(elapsed, 2)
    report["locust_exit_code"] = finished.returncode
    (out / "summary.json").write_text(json.dumps(report, indent=2) + "\n")
    brief = {k: report[k] for k in ("offered_rps", "achieved_rps", "requests", "failures")}
    print(f"{out}/summary.json: {json.dumps(brief)}")
    if report["kept_schedule"] is False:
        print(
            f"warning: achieved {report['achieved_rps']} of {report['offered_rps']} req/s offered: "
            "the users fell behind their schedule, so the latencies understate what callers "
            "would see (coordinated omission). Report the achieved rate as the capacity, or add "
            "users at a lower rate each."
        )
    return 1 if report["failures"] or finished.returncode else 0


if __name__ == "__main__":
    sys.exit(main())
