"""A realistic request mix against the sidecar, under several identities.

    locust -f loadtests/locustfile.py --host http://127.0.0.1:8080     # or: python -m loadtests.run

Each locust user is one principal (alice, bob, carol, … in turn; `WHOSE_LOAD_ASKERS`), and
its memory extractor posts what it said as `extractor-bot` (`WHOSE_LOAD_EXTRACTOR`). A user
works through a shuffled deck of WEIGHTS: every 20 requests it makes exactly this mix, so
short runs exercise every request type and long ones converge to the same shares.

| task              | share | request                                   | expected            |
|-------------------|------:|-------------------------------------------|---------------------|
| `recall`          |  40 % | POST /v1/recall, varied query/limit/filter| 200                 |
| `recall_audience` |  15 % | POST /v1/recall with an audience          | 200                 |
| `get_own`         |  10 % | GET /v1/memories/{id}, an id it was shown | 200                 |
| `get_pool`        |   5 % | GET /v1/memories/{id}, anyone's id        | 200, or 404 (hidden)|
| `get_hidden`      |   5 % | GET /v1/memories/{id}, an id nobody here  | 404, always         |
|                   |       |   may read (or that does not exist)       |                     |
| `history`         |   5 % | GET /v1/memories/{id}/history, own id     | 200                 |
| `proposition`     |   5 % | GET /v1/propositions/{key}                | 200                 |
| `observation`     |   5 % | POST /v1/observations as the extractor    | 201                 |
| `write`           |   5 % | POST /v1/memories, a belief on a topic    | 201 (supersedes the |
|                   |       |   (supersedes its holder's current view)  |  holder's old view) |
| `belief_update`   |   5 % | POST /v1/memories with explicit supersedes| 201                 |

Any other status is a failure, every 5xx included; so is a 404 for an id the same asker was
just shown, and a 200 for a record no asker of the mix may read (a leak). Requests are named
by route template (`/v1/memories/{id}`), so locust's stats group by route; the per-task
breakdown (and each status seen) is written to `WHOSE_LOAD_MIX_OUT` when locust quits.

Rate: `WHOSE_LOAD_RATE` > 0 paces each user at that many requests per second
(`constant_throughput`, the fixed-rate mode; see README.md); 0 sends back to back (closed).
Ids for `get_pool` come from `WHOSE_LOAD_IDS_FILE` (written by `loadtests.seed`) and from
what any user was shown.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import sys
import uuid
from collections import Counter, deque
from pathlib import Path
from typing import Any

import gevent
import locust.stats
from locust import HttpUser, constant, constant_throughput, events, task

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.recall_http import ATTRIBUTES, MODALITIES, TOPICS, VALUES  # noqa: E402
from loadtests.identities import from_env  # noqa: E402

WEIGHTS: dict[str, int] = {
    "recall": 8,
    "recall_audience": 3,
    "get_own": 2,
    "get_pool": 1,
    "get_hidden": 1,
    "history": 1,
    "proposition": 1,
    "observation": 1,
    "write": 1,
    "belief_update": 1,
}
EXPECTED: dict[str, frozenset[int]] = {
    "recall": frozenset({200}),
    "recall_audience": frozenset({200}),
    "get_own": frozenset({200}),
    "get_pool": frozenset({200, 404}),
    "get_hidden": frozenset({404}),
    "history": frozenset({200}),
    "proposition": frozenset({200}),
    "observation": frozenset({201}),
    "write": frozenset({201}),
    "belief_update": frozenset({201}),
}

IDENTITIES = from_env()
IDENTITIES.check()
RATE = float(os.environ.get("WHOSE_LOAD_RATE", "0"))
SEED = int(os.environ.get("WHOSE_LOAD_SEED", "7"))
POOL_SIZE = 5000

# Ids any user may try to GET: seeded ones, then what recalls returned (bounded).
POOL: deque[str] = deque(maxlen=POOL_SIZE)
# Ids of seeded records that no asker of the mix may read.
HIDDEN: list[str] = []
if ids_file := os.environ.get("WHOSE_LOAD_IDS_FILE"):
    _seeded = json.loads(Path(ids_file).read_text())
    POOL.extend(_seeded["ids"][-POOL_SIZE:])
    HIDDEN.extend(_seeded.get("hidden", [])[-POOL_SIZE:])

# task -> status -> count, and task -> failures; written at quit.
STATUSES: dict[str, Counter[str]] = {name: Counter() for name in WEIGHTS}
FAILURES: Counter[str] = Counter()
_numbers = itertools.count()


def _count(
    context: dict[str, Any], response: Any, exception: BaseException | None, **_: Any
) -> None:
    name = context.get("task")
    if name not in STATUSES:
        return
    STATUSES[name][str(getattr(response, "status_code", 0) or 0)] += 1
    if exception is not None:
        FAILURES[name] += 1


# locust writes its CSV from a greenlet every CSV_STATS_INTERVAL_SEC and flushes it every
# CSV_STATS_FLUSH_INTERVAL_SEC (10 s); it does not write once more at exit, so a short run's
# CSV would miss its last seconds. Flush on every write, and let it write once more at quit.
locust.stats.CSV_STATS_FLUSH_INTERVAL_SEC = 0


def _write_mix(**_: Any) -> None:
    """At quit (the users have stopped): the per-task mix, and one last CSV write."""
    gevent.sleep(locust.stats.CSV_STATS_INTERVAL_SEC + 0.2)
    out = os.environ.get("WHOSE_LOAD_MIX_OUT")
    if not out:
        return
    report = {
        "weights": WEIGHTS,
        "identity_mode": IDENTITIES.mode,
        "rate_per_user": RATE,
        "tasks": {
            name: {
                "requests": sum(STATUSES[name].values()),
                "failures": FAILURES[name],
                "statuses": dict(STATUSES[name]),
            }
            for name in WEIGHTS
        },
    }
    Path(out).write_text(json.dumps(report, indent=2) + "\n")


events.request.add_listener(_count)  # type: ignore[no-untyped-call]
events.quitting.add_listener(_write_mix)  # type: ignore[no-untyped-call]


def _why(response: Any) -> str:
    """A stable reason for the failure table (no decision ids, so failures group)."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:100] if response.text else "(no body)"
    if not isinstance(body, dict):
        return "(unexpected body)"
    detail = body.get("detail", body)
    if isinstance(detail, dict):
        reason = detail.get("reason") or detail.get("error")
        reasons = detail.get("reasons")
        return f"{reason} {json.dumps(reasons)[:200]}" if reasons else str(reason)
    return json.dumps(detail)[:200]


class MemoryUser(HttpUser):
    """One principal and its extractor; one request per task, in a weighted shuffled deck."""

    wait_time = constant_throughput(RATE) if RATE > 0 else constant(0)

    def on_start(self) -> None:
        number = next(_numbers)
        self.me = IDENTITIES.askers[number % len(IDENTITIES.askers)]
        self.peers = [a for a in IDENTITIES.askers if a != self.me] or [self.me]
        self.rng = random.Random(SEED * 1000 + number)
        self.deck: list[str] = []
        self.seen: deque[str] = deque(maxlen=200)  # ids this principal was shown
        self.tag = uuid.UUID(int=self.rng.getrandbits(128)).hex[:12]
        self.head: str | None = None  # current version of this user's own belief chain
        self.sessions = 0
        self.recall()  # learn a few ids before the first GET

    @task
    def step(self) -> None:
        if not self.deck:
            self.deck = [name for name, weight in WEIGHTS.items() for _ in range(weight)]
            self.rng.shuffle(self.deck)
        getattr(self, self.deck.pop())()

    # -- requests -----------------------------------------------------------------------

    def _call(self, name: str, method: str, path: str, route: str, who: str, **kwargs: Any) -> Any:
        """One request; counted as a failure unless its status is expected for the task."""
        with self.client.request(
            method,
            path,
            name=route,
            headers=IDENTITIES.headers(who),
            catch_response=True,
            context={"task": name},
            **kwargs,
        ) as response:
            status = response.status_code
            if status not in EXPECTED[name]:
                kind = "server error" if status >= 500 else "unexpected status"
                response.failure(f"{name}: {kind} {status} {_why(response)}")
                return None
            response.success()
            return response.json() if status in (200, 201) else None

    def _remember(self, body: Any) -> None:
        for item in body.get("items", []) if body else []:
            self.seen.append(item["id"])
            POOL.append(item["id"])

    def _topic(self) -> str:
        return self.rng.choice(TOPICS)

    def _query(self) -> str:
        topic = self._topic()
        return self.rng.choice(
            [
                f"what about the {topic}?",
                f"when is the {topic}?",
                f"who said the {topic} {self.rng.choice(ATTRIBUTES)} {self.rng.choice(VALUES)}",
                f"{topic}",
            ]
        )

    def _recall_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"query": self._query(), "limit": self.rng.choice([5, 10, 10, 20])}
        extra = self.rng.random()
        if extra < 0.15:
            body["about"] = self._topic().replace(" ", ".")
        elif extra < 0.25:
            body["min_confidence"] = 0.5
        elif extra < 0.30:
            body["include_history"] = True
        return body

    def recall(self) -> None:
        body = self._call(
            "recall", "POST", "/v1/recall", "/v1/recall", self.me, json=self._recall_body()
        )
        self._remember(body)

    def recall_audience(self) -> None:
        audience = self.rng.choice(
            [[self.rng.choice(self.peers)], [IDENTITIES.group], self.peers[:2]]
        )
        request = self._recall_body() | {"audience": audience}
        body = self._call(
            "recall_audience", "POST", "/v1/recall", "/v1/recall", self.me, json=request
        )
        self._remember(body)

    def _own_id(self) -> str | None:
        return self.rng.choice(self.seen) if self.seen else None

    def get_own(self) -> None:
        record_id = self._own_id()
        if record_id is None:  # shown nothing yet: ask for an id that does not exist
            self.get_pool()
            return
        path = f"/v1/memories/{record_id}"
        self._call("get_own", "GET", path, "/v1/memories/{id}", self.me)

    def get_pool(self) -> None:
        record_id = self.rng.choice(POOL) if POOL else str(uuid.uuid4())
        path = f"/v1/memories/{record_id}"
        body = self._call("get_pool", "GET", path, "/v1/memories/{id}", self.me)
        if body:
            self.seen.append(body["item"]["id"])

    def get_hidden(self) -> None:
        """Someone else's record this asker may not read, or a missing one: the same 404."""
        record_id = self.rng.choice(HIDDEN) if HIDDEN else str(uuid.uuid4())
        path = f"/v1/memories/{record_id}"
        self._call("get_hidden", "GET", path, "/v1/memories/{id}", self.me)

    def history(self) -> None:
        record_id = self.head or self._own_id()
        if record_id is None:
            self.get_pool()
            return
        path = f"/v1/memories/{record_id}/history"
        self._call("history", "GET", path, "/v1/memories/{id}/history", self.me)

    def proposition(self) -> None:
        key = self._topic().replace(" ", ".")
        params = {"audience": [IDENTITIES.group]} if self.rng.random() < 0.3 else {}
        self._call(
            "proposition",
            "GET",
            f"/v1/propositions/{key}",
            "/v1/propositions/{key}",
            self.me,
            params=params,
        )

    def _proposition(self) -> dict[str, Any]:
        topic = self._topic()
        value = self.rng.choice(VALUES)
        return {
            "text": f"the {topic} {self.rng.choice(ATTRIBUTES)} {value}",
            "key": topic.replace(" ", "."),
            "value": value,
        }

    def observation(self) -> None:
        """The extractor posts what this principal said; each claim becomes its view."""
        self.sessions += 1
        present = [self.me, *self.rng.sample(self.peers, self.rng.randint(0, len(self.peers)))]
        claims: list[dict[str, Any]] = []
        for _ in range(self.rng.randint(1, 3)):
            claim: dict[str, Any] = {"proposition": self._proposition()}
            if len(present) > 1 and self.rng.random() < 0.3:  # "I think Bob knows ..."
                claim |= {"about": present[1], "attitude": "knows", "hedged": True}
            else:
                claim["hedged"] = self.rng.random() < 0.5
            claims.append(claim)
        observation = {
            "speaker": self.me,
            "source_id": f"load-{self.tag}-session-{self.sessions}",
            "channel": "dm" if len(present) == 1 else "meeting",
            "participants": present,
            "claims": claims,
        }
        self._call(
            "observation",
            "POST",
            "/v1/observations",
            "/v1/observations",
            IDENTITIES.extractor,
            json=observation,
        )

    def _belief(self, proposition: dict[str, Any], audience: list[str]) -> dict[str, Any]:
        return {
            "content": f"{self.me} believes {proposition['text']}",
            "proposition": proposition,
            "observer_id": self.me,
            "source_id": f"load-{self.tag}",
            "source": {"kind": "conversation", "speaker": self.me},
            "modality": self.rng.choice(MODALITIES),
            "confidence": round(self.rng.uniform(0.3, 1.0), 2),
            "audience": audience,
        }

    def write(self) -> None:
        """A belief on a shared topic: supersedes this holder's current view of it, if any."""
        audience = self.rng.choice([[self.me], [self.me, self.rng.choice(self.peers)]])
        record = self._belief(self._proposition(), audience)
        body = self._call("write", "POST", "/v1/memories", "/v1/memories", self.me, json=record)
        if body:
            self.seen.append(body["records"][0]["id"])

    def belief_update(self) -> None:
        """This user's own chain: each new estimate names the version it replaces."""
        estimate = self.rng.randint(1, 100)
        proposition = {
            "text": f"the {self.tag} estimate is {estimate} days",
            "key": f"load.{self.tag}.estimate",
            "value": estimate,
        }
        record = self._belief(proposition, [self.me])
        if self.head is not None:
            record["supersedes"] = self.head
        body = self._call(
            "belief_update", "POST", "/v1/memories", "/v1/memories", self.me, json=record
        )
        if body:
            self.head = body["records"][0]["id"]
            self.seen.append(self.head)


# gevent's loop caches "now" and only refreshes it when it runs; importing this file (the
# sidecar's vocabulary pulls in a few packages) blocks it for a second or two, and locust's
# --run-time timer, armed next, would then fire that much early. Refresh it.
gevent.get_hub().loop.update_now()
