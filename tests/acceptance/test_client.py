"""The Python client (sidecar/client/) against a served sidecar, on both store backends.

Every native route through both clients, answers read into the server's own models,
refusals raised as the error tree's classes with every reason, and the retry rule:
a read is asked again after a 503 or a failed connection, a write only when it never
left. Faults are real: a sidecar whose OPA is not there answers 503, a closed port
refuses connections, and a listener that never answers lets a request time out.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import jwt
import pytest

from sidecar.client import (
    AsyncWhoseClient,
    DevIdentity,
    ErasureRefused,
    Forbidden,
    InvalidRequest,
    NotFound,
    PolicyUnavailable,
    Retries,
    Unauthenticated,
    WhoseClient,
    WriteRefused,
    as_text,
)
from sidecar.messages import (
    ErasureRequest,
    ExplainRequest,
    Observation,
    RecallRequest,
    WitnessedEvent,
)
from sidecar.record import MemoryWrite
from tests.acceptance.story import fresh_key
from tests.conftest import Backend, free_port, metric, start_sidecar, stop

SECRET = "client-tests-hs256-secret-32-bytes!!!!"
QUICK = Retries(attempts=3, wait_s=0.01, max_wait_s=0.05)


def token(who: str, tenant: str = "acme") -> str:
    claims = {"sub": who, "tenant": tenant, "exp": int(time.time()) + 3600}
    return jwt.encode(claims, SECRET)


@pytest.fixture(scope="module")
def base(store_backend: Backend, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A sidecar taking tokens (and dev headers), on each store backend."""
    env = {"WHOSE_JWT_HS256_SECRET": SECRET, **store_backend.env()}
    url, process = start_sidecar(tmp_path_factory.mktemp("client"), env=env)
    yield url
    stop(process)


@pytest.fixture
def alice(base: str) -> Iterator[WhoseClient]:
    with WhoseClient(base, token=token("alice")) as client:
        yield client


@pytest.fixture
def bob(base: str) -> Iterator[WhoseClient]:
    with WhoseClient(base, token=token("bob")) as client:
        yield client


def belief(key: str, text: str = "the launch is October 17") -> MemoryWrite:
    return MemoryWrite(
        content=f"Alice believes {text}",
        proposition={"text": text, "key": key, "value": text},
        observer_id="alice",
        source_id="private-session-42",
        source={"kind": "conversation", "speaker": "alice"},
        modality="reported_belief",
        confidence=0.78,
        audience=["alice"],
    )


def test_alice_is_told_whose_it_is_and_bob_is_refused(alice: WhoseClient, bob: WhoseClient) -> None:
    key = fresh_key()
    [stored] = alice.remember(belief(key)).records
    assert stored.id is not None
    query = RecallRequest(query="when is the launch?", about=key)
    told = alice.recall(query)
    assert told.verdict == "attributed"
    assert [item.id for item in told.items] == [stored.id]
    assert told.items[0].attribution.startswith("alice believes that the launch is October 17")
    assert "alice believes that the launch is October 17" in as_text(told)
    refused = bob.recall(query)
    assert refused.verdict == "abstain"
    assert refused.items == []
    assert as_text(refused) == "abstain: nothing you may be told: verify or abstain."
    with pytest.raises(NotFound) as missing:
        bob.get(stored.id)
    assert missing.value.body() == {"error": "not_found", "reasons": []}


def test_a_flattening_write_is_refused_with_every_reason(alice: WhoseClient) -> None:
    key = fresh_key()
    flattened = {
        "content": "Bob knows the launch is October 17",
        "proposition": {"text": "the launch is October 17", "key": key},
        "observer_id": "bob",
        "source_id": "private-session-42",
        "source": {"kind": "conversation", "speaker": "alice"},
        "modality": "known",
        "audience": ["alice", "bob"],
    }
    with pytest.raises(WriteRefused) as refused:
        alice.remember([belief(key), flattened])
    [problem] = refused.value.problems
    assert problem["index"] == 1
    assert problem["reasons"] == [
        "known_without_evidence",
        "observer_not_speaker",
        "writer_not_holder",
    ]
    # All or nothing: the acceptable record of the batch was not stored either.
    assert alice.views(key).perspectives == []


def test_every_read_route_reads_into_the_server_models(alice: WhoseClient, base: str) -> None:
    key = fresh_key()
    first = alice.remember(belief(key)).records[0]
    second = alice.remember(belief(key, "the launch is October 20")).records[0]
    assert first.id is not None
    assert second.id is not None
    got = alice.get(second.id)
    assert got.item.supersedes == first.id
    assert got.record.content == "Alice believes the launch is October 20"
    back_then = alice.get(second.id, as_of=first.valid_at)
    assert back_then.item.id == first.id
    assert [item.id for item in alice.history(second.id).items] == [first.id, second.id]
    views = alice.views(key)
    assert [mind.holder for mind in views.minds] == ["alice"]
    assert [view.record_id for view in views.minds[0].views] == [second.id]
    page = alice.scroll({"proposition.key": key})
    assert [point.id for point in page.points] == [second.id]
    assert page.points[0].payload["whose"]["usable_as"] == "belief"
    with WhoseClient(base, dev=DevIdentity("erin", "acme", roles=["auditor"])) as erin:
        entries = erin.audit(asker="alice", record=str(second.id), purpose="get").entries
    assert entries
    assert all(entry.asker == "alice" for entry in entries)
    with WhoseClient(base, dev=DevIdentity("pat", "acme", roles=["policy-admin"])) as pat:
        explained = pat.explain(ExplainRequest(asker="bob", record_id=second.id))
    assert explained.decision.allow is False
    assert "audience_excludes:bob" in explained.decision.reasons


def test_an_extractor_observes_and_witnesses(base: str, alice: WhoseClient) -> None:
    key = fresh_key()
    with WhoseClient(base, dev=DevIdentity("extractor-bot", "acme")) as extractor:
        said = extractor.observe(
            Observation(
                speaker="alice",
                source_id="standup",
                participants=["alice"],
                claims=[{"proposition": {"text": "the demo is on Friday", "key": key}}],
            )
        )
        seen = extractor.witness(
            WitnessedEvent(
                proposition={"text": "the marble is in the basket", "key": fresh_key()},
                witnessed_by=["sally", "anne"],
                source_id="room-1",
            )
        )
    assert [record.observer_id for record in said.records] == ["alice"]
    # One record a witness: what each thinks the other thinks is derived when read.
    assert [record.observer_id for record in seen.records] == ["sally", "anne"]
    assert alice.recall(RecallRequest(query="when is the demo?", about=key)).items


def test_refusals_are_the_error_trees(base: str, alice: WhoseClient) -> None:
    with (
        WhoseClient(base, token="not-a-token") as stranger,
        pytest.raises(Unauthenticated) as unknown,
    ):
        stranger.recall("when is the launch?")
    assert unknown.value.reason == "invalid_token"
    with pytest.raises(Forbidden) as forbidden:
        alice.audit()
    assert forbidden.value.reasons == ["role:auditor"]
    with pytest.raises(InvalidRequest) as invalid:
        alice.recall(RecallRequest(query="launch", limit=500))
    assert invalid.value.reasons == ["limit_within_1..100"]


def test_delete_erases_and_answers_what_it_erased(alice: WhoseClient, bob: WhoseClient) -> None:
    # The round trip against the sidecar's DELETE /v1/memories/{id}, typed both ways.
    [stored] = alice.remember(belief(fresh_key())).records
    assert stored.id is not None
    # Bob may not see it: answered as a missing record, and nothing is erased.
    with pytest.raises(NotFound):
        bob.delete(stored.id)
    assert alice.get(stored.id).item.id == stored.id
    erased = alice.delete(stored.id, reason="client-test")
    assert erased.erased == [stored.id]
    with pytest.raises(NotFound):
        alice.get(stored.id)
    with pytest.raises(NotFound):
        alice.delete(stored.id)


def test_an_erasure_the_policy_refuses_reads_back_with_its_reasons(
    alice: WhoseClient, bob: WhoseClient
) -> None:
    shared = belief(fresh_key()).model_copy(update={"audience": ["alice", "bob"]})
    [stored] = alice.remember(shared).records
    assert stored.id is not None
    # Bob may read it, but it is Alice's to erase, not his.
    with pytest.raises(ErasureRefused) as refused:
        bob.delete(stored.id)
    assert "not_holder_or_writer" in str(refused.value.reasons)
    assert bob.get(stored.id).item.id == stored.id
    [version] = alice.delete(stored.id, history=True).erased
    assert version == stored.id


def test_an_officer_requests_an_erasure_and_follows_it(base: str) -> None:
    person = f"subject-{uuid.uuid4().hex[:8]}"
    key = fresh_key()
    mine = MemoryWrite(
        content=f"{person} believes the launch is October 17",
        proposition={"text": "the launch is October 17", "key": key},
        observer_id=person,
        source_id="private-session-43",
        source={"kind": "conversation", "speaker": person},
        modality="reported_belief",
        confidence=0.78,
        audience=[person],
    )
    with (
        WhoseClient(base, token=token(person)) as someone,
        WhoseClient(base, token=token("dpo")) as officer,
    ):
        [stored] = someone.remember(mine).records
        assert stored.id is not None
        with pytest.raises(ErasureRefused) as refused:
            someone.request_erasure({"kind": "subject", "subject": person})
        assert refused.value.reasons == ["needs_erasure_officer"]
        progress = officer.request_erasure(
            ErasureRequest(kind="subject", subject=person, reason="client-test")
        )
        assert (progress.status, progress.erased, progress.requested_by) == ("done", 1, "dpo")
        followed = officer.erasure_status(progress.request_id)
        assert (followed.request_id, followed.status, followed.erased) == (
            progress.request_id,
            "done",
            1,
        )
        # Neither the requester nor an officer: the request is not theirs to follow.
        with pytest.raises(NotFound):
            someone.erasure_status(progress.request_id)
        with pytest.raises(NotFound):
            someone.get(stored.id)


async def test_the_async_client_answers_alike(base: str) -> None:
    key = fresh_key()
    async with (
        AsyncWhoseClient(base, token=token("alice")) as alice,
        AsyncWhoseClient(base, token=token("bob")) as bob,
    ):
        [stored] = (await alice.remember(belief(key))).records
        assert stored.id is not None
        query = RecallRequest(query="when is the launch?", about=key)
        assert (await alice.recall(query)).verdict == "attributed"
        assert (await bob.recall(query)).verdict == "abstain"
        assert (await alice.get(stored.id)).item.id == stored.id
        assert [i.id for i in (await alice.history(stored.id)).items] == [stored.id]
        assert (await alice.views(key)).perspectives[0].id == stored.id
        with pytest.raises(NotFound):
            await bob.get(stored.id)
        with pytest.raises(WriteRefused):
            await bob.remember(belief(key))
        assert (await alice.delete(stored.id)).erased == [stored.id]
        with pytest.raises(NotFound):
            await alice.get(stored.id)


def test_a_token_function_is_asked_before_every_request(base: str) -> None:
    current = {"who": "alice"}
    with WhoseClient(base, token=lambda: token(current["who"])) as client:
        key = fresh_key()
        client.remember(belief(key))
        assert client.tenant == "acme"
        assert client.recall(RecallRequest(query="launch", about=key)).verdict == "attributed"
        current["who"] = "bob"
        assert client.recall(RecallRequest(query="launch", about=key)).verdict == "abstain"


# --- what is asked again -------------------------------------------------------------


@pytest.fixture(scope="module")
def no_opa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A sidecar whose OPA is not there: every read and write answers 503."""
    port = free_port()
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0
    env = {"WHOSE_OPA_URL": f"http://127.0.0.1:{port}"}
    url, process = start_sidecar(tmp_path_factory.mktemp("client-no-opa"), env=env)
    yield url
    stop(process)


def answered(base: str, route: str) -> float:
    return metric(base, "whose_request_seconds_count", route=route, status="503")


def test_a_read_is_asked_again_after_503_and_a_write_is_not(no_opa: str) -> None:
    with WhoseClient(no_opa, dev=DevIdentity("alice", "acme"), retries=QUICK) as alice:
        reads, writes = answered(no_opa, "/v1/recall"), answered(no_opa, "/v1/memories")
        with pytest.raises(PolicyUnavailable) as read:
            alice.recall("when is the launch?")
        assert read.value.decision_id is not None
        with pytest.raises(PolicyUnavailable):
            alice.remember(belief(fresh_key()))
        assert answered(no_opa, "/v1/recall") - reads == QUICK.attempts
        assert answered(no_opa, "/v1/memories") - writes == 1


def ask(client: WhoseClient, call: str) -> None:
    if call == "recall":
        client.recall("when is the launch?")
    else:
        client.remember(belief(fresh_key()))


def counting(attempts: list[str]) -> dict[str, Any]:
    def count(request: httpx.Request) -> None:
        attempts.append(request.method)

    return {"event_hooks": {"request": [count]}}


@pytest.mark.parametrize("call", ["recall", "remember"])
def test_a_request_that_never_left_is_sent_again(call: str) -> None:
    port = free_port()  # nobody listens: each connection is refused
    attempts: list[str] = []
    http = httpx.Client(timeout=5, **counting(attempts))
    url = f"http://127.0.0.1:{port}"
    with (
        WhoseClient(url, token="t", retries=QUICK, http=http) as client,
        pytest.raises(httpx.ConnectError),
    ):
        ask(client, call)
    assert len(attempts) == QUICK.attempts


class Silent:
    """A listener that reads each request and never answers (a hung server)."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}"
        self.requests = 0
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            if connection.recv(65536):
                self.requests += 1
            self.held.append(connection)

    def close(self) -> None:
        # A close alone leaves the thread blocked in accept(); shutting the listener down
        # wakes it at once (the join below waited its whole 10 s before).
        self.socket.shutdown(socket.SHUT_RDWR)
        self.socket.close()
        for connection in self.held:
            connection.close()
        self.thread.join(timeout=10)


@pytest.fixture
def silent() -> Iterator[Silent]:
    server = Silent()
    yield server
    server.close()


@pytest.mark.parametrize("call", ["recall", "remember"])
def test_a_request_that_timed_out_is_not_sent_again(silent: Silent, call: str) -> None:
    # Sent and unanswered: it may have been applied (a write) or be running still.
    with (
        WhoseClient(silent.url, token="t", timeout=0.5, retries=QUICK) as client,
        pytest.raises(httpx.ReadTimeout),
    ):
        ask(client, call)
    assert silent.requests == 1


def test_answers_carry_instants_in_utc(alice: WhoseClient) -> None:
    [stored] = alice.remember(belief(fresh_key())).records
    assert stored.valid_at is not None
    assert stored.valid_at.tzinfo is not None
    assert stored.valid_at <= datetime.now(UTC)
    assert isinstance(stored.id, uuid.UUID)
