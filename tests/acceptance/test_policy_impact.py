"""A policy edit's impact, and the console that shows it (issue 38).

One sidecar for the module (tokens, the console on the operations listener), a few
reads audited, then candidates replayed against them. The check is exact: the flips
the report lists are exactly the audited (record, read) pairs whose decision differs
when each is decided alone by a plain `opa eval` of `whose.disclosure.single` under
the shipped policy and under the candidate: for the docs' worked example and for
edits Hypothesis draws.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sidecar.policy.candidate import pack
from tests import forks
from tests.conftest import OPA_BINARY, POLICY_DIR, REPO, examples, ops, start_sidecar, stop
from tests.factories import tell_the_worked_example

pytestmark = pytest.mark.acceptance

SECRET = "impact-test-secret-" + "x" * 32
EXAMPLE = REPO / "docs" / "examples" / "manager-reports.patch"
EVE = "<i>eve</i>"  # a reader whose name is markup: the console must show it as text


def token(sub: str, *roles: str) -> str:
    claims = {"sub": sub, "tenant": "acme", "roles": list(roles), "exp": int(time.time()) + 3600}
    return jwt.encode(claims, SECRET)


def bearer(sub: str, *roles: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token(sub, *roles)}"}


ADMIN = bearer("pat", "policy-admin", "auditor")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The sidecar, the records, and the reads its audit holds."""
    folder = tmp_path_factory.mktemp("impact")
    env = {"WHOSE_JWT_HS256_SECRET": SECRET, "WHOSE_CONSOLE": "ops"}
    base, process = start_sidecar(folder / "sidecar", env, dev=False)
    try:
        with httpx.Client(base_url=base, timeout=30) as http:
            ids = _write(http)
            _read(http, ids)
            yield {"base": base, "ids": ids, "folder": folder}
    finally:
        stop(process)


def _write(http: httpx.Client) -> dict[str, str]:
    ids: dict[str, str] = {}
    mine = {
        "proposition": {"text": "the launch is October 17", "key": "launch.date", "value": "x"},
        "observer_id": "alice",
        "source_id": "private-session-42",
        "source": {"kind": "conversation", "speaker": "alice"},
        "modality": "reported_belief",
        "confidence": 0.78,
    }
    for name, extra in (
        ("private", {"audience": ["alice"]}),
        ("team", {"audience": ["group:launch-team"], "access_scope": "launch-core"}),
    ):
        body = mine | {"content": f"alice's {name} note"} | extra
        stored = http.post("/v1/memories", headers=bearer("alice"), json=body)
        assert stored.status_code == 201, stored.text
        ids[name] = stored.json()["records"][0]["id"]
    # The worked example's stand-up and DM (docs/policies.md).
    ids |= tell_the_worked_example(http, bearer("extractor-bot"))
    return ids


def _read(http: httpx.Client, ids: dict[str, str]) -> None:
    for reader, which in (
        ("bob", "private"),  # Bob's withheld read
        ("bob", "team"),
        ("carol", "launch-standup"),
        ("carol", "dm"),
        ("dave", "launch-standup"),
        ("alice", "dm"),
        (EVE, "private"),
    ):
        http.get(f"/v1/memories/{ids[which]}", headers=bearer(reader))
    for reader in ("bob", "carol", "alice"):
        http.post("/v1/recall", headers=bearer(reader), json={"query": "launch", "limit": 10})


# --- the oracle: each audited pair decided alone by `opa eval` --------------------------


@pytest.fixture(scope="module")
def inputs(world: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(entry, record, the exact single-record input) for every audited read pair."""
    with httpx.Client(base_url=world["base"], timeout=30) as http:
        audit = http.get("/v1/audit", params={"limit": 1000}, headers=ADMIN).json()
        pairs = []
        for entry in audit["entries"]:
            if entry["purpose"] not in ("recall", "get", "history"):
                continue
            for record in entry["allowed"] + entry["withheld"]:
                explained = http.post(
                    "/v1/explain",
                    headers=ADMIN,
                    json={
                        "asker": entry["asker"],
                        "record_id": record["id"],
                        "purpose": entry["purpose"],
                        "as_of": entry["as_of"],
                        "audience": entry["audience"],
                    },
                )
                assert explained.status_code == 200, explained.text
                pairs.append((entry["decision_id"], record["id"], explained.json()["input"]))
    assert len(pairs) >= 9
    return pairs


def decide_alone(policy: Path, inputs: list[tuple[str, str, dict[str, Any]]]) -> list[Any]:
    """Each input decided alone by the single-record rule, by the OPA binary."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as given_file:
        json.dump({"inputs": [i for _, _, i in inputs]}, given_file)
    given_ = Path(given_file.name)
    query = "[d | some i in input.inputs; d := data.whose.disclosure.single with input as i]"
    result = subprocess.run(
        [
            str(OPA_BINARY),
            "eval",
            "-f",
            "json",
            "--ignore",
            "*_test.rego",
            "-d",
            str(policy),
            "-i",
            str(given_),
            query,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    given_.unlink()
    return list(json.loads(result.stdout)["result"][0]["expressions"][0]["value"])


def seen_as(decision: dict[str, Any]) -> tuple[Any, ...]:
    """What the asker would be shown: whether, and as what (reasons of a denial aside)."""
    if not decision["allow"]:
        return (False,)
    return (True, decision["usable_as"], tuple(sorted(decision.get("obligations", []))))


@pytest.fixture(scope="module")
def shipped(inputs: list[tuple[str, str, dict[str, Any]]]) -> list[Any]:
    return decide_alone(POLICY_DIR, inputs)


def differing(
    inputs: list[tuple[str, str, dict[str, Any]]], before: list[Any], after: list[Any]
) -> set[tuple[str, str]]:
    return {
        (record, entry)
        for (entry, record, _), b, a in zip(inputs, before, after, strict=True)
        if seen_as(b) != seen_as(a)
    }


def impact(base: str, candidate: Path, headers: dict[str, str] = ADMIN) -> httpx.Response:
    return httpx.post(
        f"{base}/v1/policy/impact",
        params={"max_examples": 200},
        content=pack(candidate),
        headers=headers | {"content-type": "application/gzip"},
        timeout=60,
    )


def flipped(report: dict[str, Any]) -> set[tuple[str, str]]:
    assert len(report["examples"]) == sum(report["flips"].values())  # none left out
    return {(f["record_id"], f["entry"]) for f in report["examples"]}


def assert_exact(report: dict[str, Any], expected: set[tuple[str, str]]) -> None:
    listed = flipped(report)
    assert listed == expected, (
        f"missing flips {expected - listed}, flips that are none {listed - expected}"
    )
    records = {r for kind in report["records"].values() for r in kind}
    assert records == {r for r, _ in expected}


def patched(into: Path) -> Path:
    shutil.copytree(POLICY_DIR, into / "rego")
    subprocess.run(["git", "apply", str(EXAMPLE)], cwd=into, check=True)
    return into / "rego"


# --- the tests ---------------------------------------------------------------------------


def test_worked_example_lists_exactly_the_flips(
    world: dict[str, Any], inputs: list[Any], shipped: list[Any], tmp_path: Path
) -> None:
    candidate = patched(tmp_path)
    answered = impact(world["base"], candidate)
    assert answered.status_code == 200, answered.text
    report = answered.json()
    expected = differing(inputs, shipped, decide_alone(candidate, inputs))
    assert_exact(report, expected)
    # Carol, bob's manager, would now read the stand-up; the DM stays bob's and alice's.
    assert report["records"]["newly_disclosed"] == [world["ids"]["launch-standup"]]
    assert report["flips"]["newly_withheld"] == report["flips"]["changed_use"] == 0
    flip = report["examples"][0]
    assert flip["asker"] == "carol"
    assert flip["source_id"] == "launch-standup-1"
    assert flip["rules"] == ["data.whose.disclosure.denials.hearers"]
    assert flip["current"]["reasons"] == ["audience_excludes:carol"]
    assert flip["candidate"]["allow"] is True
    assert report["by_rule"][0]["key"] == "data.whose.disclosure.denials.hearers"


def test_a_dropped_flip_is_caught(
    world: dict[str, Any], inputs: list[Any], shipped: list[Any], tmp_path: Path
) -> None:
    # The check above is not vacuous: a report missing one flip fails it.
    candidate = patched(tmp_path)
    report = impact(world["base"], candidate).json()
    expected = differing(inputs, shipped, decide_alone(candidate, inputs))
    dropped = dict(report, examples=report["examples"][1:])
    dropped["flips"] = dict(report["flips"], newly_disclosed=report["flips"]["newly_disclosed"] - 1)
    with pytest.raises(AssertionError, match="missing flips"):
        assert_exact(dropped, expected)


def _edited(folder: Path, edit: dict[str, Any]) -> Path:
    policy = patched(folder) if edit["patch"] else folder / "rego"
    if not edit["patch"]:
        shutil.copytree(POLICY_DIR, policy)
    directory_file = policy / "whose" / "directory" / "data.json"
    directory = json.loads(directory_file.read_text())
    acme = directory["tenants"]["acme"]
    bob = acme["principals"]["bob"]
    if edit["manager"] is None:
        bob.pop("manager", None)
    else:
        bob["manager"] = edit["manager"]
    if edit["bob_cleared"]:
        bob["scopes"] = ["launch-core"]
    acme["groups"]["launch-team"] = edit["team"]
    directory_file.write_text(json.dumps(directory))
    if edit["patch"]:
        config_file = policy / "whose" / "config" / "data.json"
        config = json.loads(config_file.read_text())
        config["reports"]["work_channels"] = edit["channels"]
        config_file.write_text(json.dumps(config))
    return policy


EDITS = st.fixed_dictionaries(
    {
        "patch": st.booleans(),
        "manager": st.sampled_from([None, "carol", "alice", "dave"]),
        "bob_cleared": st.booleans(),
        "team": st.lists(st.sampled_from(["alice", "bob", "carol", "dave"]), unique=True),
        "channels": st.lists(st.sampled_from(["launch-standup", "team", "dm"]), unique=True),
    }
)


@settings(
    max_examples=examples(ci=4, long=40),
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    deadline=None,
)
@given(edit=EDITS)
# Always one widening by data alone: bob cleared for the team's scope.
@example(
    edit={
        "patch": False,
        "manager": None,
        "bob_cleared": True,
        "team": ["alice", "bob", "carol"],
        "channels": [],
    }
)
def test_drawn_edits_list_exactly_the_flips(
    world: dict[str, Any],
    inputs: list[Any],
    shipped: list[Any],
    tmp_path_factory: pytest.TempPathFactory,
    edit: dict[str, Any],
) -> None:
    candidate = _edited(tmp_path_factory.mktemp("edit"), edit)
    answered = impact(world["base"], candidate)
    assert answered.status_code == 200, answered.text
    assert_exact(answered.json(), differing(inputs, shipped, decide_alone(candidate, inputs)))


def whose(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return forks.run(["policy", "impact", *args], {**os.environ, **env}, REPO, timeout=120)


def test_the_command_gates_a_ci_step(world: dict[str, Any], tmp_path: Path) -> None:
    admin = {"WHOSE_TOKEN": token("pat", "policy-admin")}
    flagged = ["--url", world["base"], "--fail-on-disclosure"]
    shown = whose(str(patched(tmp_path)), *flagged, env=admin)
    assert shown.returncode == 1, shown.stdout + shown.stderr
    assert "newly disclosed: 1, newly withheld: 0" in shown.stdout
    assert "would newly disclose 1 records" in shown.stderr
    # The policy in force against itself changes nothing: the step passes.
    same = whose(str(POLICY_DIR), *flagged, env=admin)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "newly disclosed: 0, newly withheld: 0, changed use: 0" in same.stdout
    # Someone without the role runs nothing.
    refused = whose(str(POLICY_DIR), *flagged, env={"WHOSE_TOKEN": token("bob", "auditor")})
    assert refused.returncode == 2
    assert "403 forbidden" in refused.stderr


def test_impact_is_a_policy_admins_and_audited(world: dict[str, Any]) -> None:
    refused = impact(world["base"], POLICY_DIR, bearer("erin", "auditor"))
    assert refused.status_code == 403
    assert refused.json() == {"error": "forbidden", "reasons": ["role:policy-admin"]}
    broken = httpx.post(
        f"{world['base']}/v1/policy/impact",
        content=b"not a bundle",
        headers=ADMIN | {"content-type": "application/gzip"},
    )
    assert broken.status_code == 422
    assert broken.json()["error"] == "candidate_refused"
    audited = httpx.get(
        f"{world['base']}/v1/audit", params={"purpose": "impact"}, headers=ADMIN
    ).json()["entries"]
    assert audited
    assert audited[0]["asker"] == "pat"
    assert audited[0]["impact"]["decisions"] >= 9


# --- the console, in a real browser -----------------------------------------------------

CHROMIUM = Path("/usr/bin/chromium")


def test_console_in_a_browser(world: dict[str, Any], tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        pytest.skip("no /usr/bin/chromium: `make test` installs Debian's chromium")
    from playwright.sync_api import expect, sync_playwright

    console = f"{ops(world['base'])}/console"
    bundle = tmp_path / "candidate.tar.gz"
    bundle.write_bytes(pack(patched(tmp_path)))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            # Someone with neither role: 403, no cookie, no data.
            page = browser.new_page()
            page.goto(f"{console}/login")
            page.fill("input[name=token]", token("bob"))
            answer = page.expect_navigation
            with answer() as nav:
                page.click("button[type=submit]")
            assert nav.value is not None
            assert nav.value.status == 403
            assert page.context.cookies() == []
            missing = page.goto(f"{console}/")
            assert missing is not None
            assert missing.status == 401
            assert world["ids"]["private"] not in page.content()
            page.close()

            # A policy admin: find Bob's withheld read, open why, upload the edit.
            page = browser.new_page()
            page.goto(f"{console}/login")
            page.fill("input[name=token]", token("pat", "auditor", "policy-admin"))
            page.click("button[type=submit]")
            page.fill("input[name=asker]", "bob")
            page.fill("input[name=outcome]", "withheld")
            page.fill("input[name=record]", world["ids"]["private"])
            page.click("form.filters button")
            row = page.locator("table.audit tbody tr").first
            expect(row).to_contain_text("audience_excludes:bob")
            row.get_by_role("link", name="why").click()
            expect(page.locator("table.rules")).to_contain_text(
                "data.whose.disclosure.denials.hearers"
            )
            expect(page.locator("table.decision")).to_contain_text("withheld")

            # Markup in a name (and the reason naming it) is text, never an element.
            page.goto(f"{console}/?asker={EVE}")
            expect(page.locator("table.audit")).to_contain_text(f"audience_excludes:{EVE}")
            assert page.locator("table.audit i").count() == 0

            page.goto(f"{console}/policy")
            expect(page.locator("table.packages")).to_contain_text("whose.disclosure")

            page.goto(f"{console}/impact")
            page.set_input_files("input[name=bundle]", str(bundle))
            page.click("form[action='/console/impact'] button")
            flips = page.locator("table.flips tbody tr")
            expect(flips).to_have_count(1)
            expect(flips.first).to_contain_text(world["ids"]["launch-standup"])
            expect(flips.first).to_contain_text("newly disclosed")
            expect(flips.first).to_contain_text("audience_excludes:carol")
        finally:
            browser.close()
    # The upload needs the double-submit value as well as the cookie.
    cookies = {"whose_console": token("pat", "policy-admin")}
    forged = httpx.post(f"{console}/impact", cookies=cookies, files={"bundle": ("b.tar.gz", b"x")})
    assert forged.status_code == 422
    assert "csrf_token_mismatch" in forged.text


# --- reads a grant disclosed to: replayed with the grants they applied ---------------------


def granted_read(env: dict[str, str], folder: Path) -> Iterator[dict[str, Any]]:
    """A sidecar of its own (the world above stays as its oracle reads it): quinn's
    appointment, disclosed to sam by quinn's grant alone, read by sam, and the grant
    then revoked."""
    base, process = start_sidecar(
        folder / "sidecar", env | {"WHOSE_JWT_HS256_SECRET": SECRET}, dev=False
    )
    try:
        with httpx.Client(base_url=base, timeout=30) as http:
            stored = http.post(
                "/v1/memories",
                headers=bearer("quinn"),
                json={
                    "content": "quinn says the dentist appointment is Thursday at 10",
                    "proposition": {"text": "the dentist appointment is Thursday at 10"},
                    "observer_id": "quinn",
                    "source_id": "quinn-diary",
                    "source": {"kind": "conversation", "speaker": "quinn"},
                    "modality": "believed",
                    "audience": ["quinn"],
                    "categories": ["appointments"],
                },
            )
            assert stored.status_code == 201, stored.text
            record = stored.json()["records"][0]["id"]
            assert http.get(f"/v1/memories/{record}", headers=bearer("sam")).status_code == 404
            given = http.post(
                "/v1/grants",
                headers=bearer("quinn"),
                json={"reader": "sam", "categories": ["appointments"]},
            )
            assert given.status_code == 201, given.text
            read = http.get(f"/v1/memories/{record}", headers=bearer("sam"))
            assert read.status_code == 200, read.text
            grant = given.json()["grant_id"]
            revoked = http.delete(f"/v1/grants/{grant}", headers=bearer("quinn"))
            assert revoked.status_code == 200, revoked.text
            yield {"base": base, "record": record, "grant": grant}
    finally:
        stop(process)


@pytest.fixture(scope="module")
def granted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    yield from granted_read({}, tmp_path_factory.mktemp("granted"))


def without_grants_for_gets(into: Path) -> Path:
    """The shipped policy, with grants applied to recalls only: sam's get would be
    withheld."""
    policy = into / "rego"
    shutil.copytree(POLICY_DIR, policy)
    rules = policy / "whose" / "disclosure" / "disclosure.rego"
    head = "granted(record, member) if {\n"
    text = rules.read_text()
    assert text.count(head) == 1
    rules.write_text(text.replace(head, head + '\tinput.purpose != "get"\n'))
    return policy


def test_a_read_a_grant_disclosed_is_replayed_with_that_grant(
    granted: dict[str, Any], tmp_path: Path
) -> None:
    # Sam's get was allowed by the grant alone. The grant is revoked now, yet the
    # replay decides the read as it was: an edit that stops grants reaching gets
    # would withhold it. Replayed without the grant, both policies withhold it, and
    # the report would say the edit changes nothing.
    with httpx.Client(base_url=granted["base"], timeout=30) as http:
        audit = http.get("/v1/audit", params={"asker": "sam"}, headers=ADMIN).json()
    gets = [e for e in audit["entries"] if e["purpose"] == "get"]
    # Newest first: the read the grant disclosed to keeps a digest of the grant it
    # passed, not the grant; the read before the grant passed none.
    assert [bool(e["allowed"]) for e in gets] == [True, False]
    assert re.fullmatch("[0-9a-f]{64}", gets[0]["grants_digest"])
    assert gets[1]["grants_digest"] is None
    answered = impact(granted["base"], without_grants_for_gets(tmp_path))
    assert answered.status_code == 200, answered.text
    report = answered.json()
    assert report["skipped"]["grants_unknown"] == 0
    assert report["flips"] == {"newly_disclosed": 0, "newly_withheld": 1, "changed_use": 0}
    assert report["records"]["newly_withheld"] == [granted["record"]]
    flip = report["examples"][0]
    assert (flip["asker"], flip["entry"]) == ("sam", gets[0]["decision_id"])
    assert flip["current"]["allow"] is True
    assert flip["candidate"]["allow"] is False
    # The read withheld before the grant was given is no flip: it applied none.
    assert report["decisions"] == 2


@pytest.fixture(scope="module")
def forgotten(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    # An audit log that keeps two entries: sam's read and the revocation outlive the
    # entry that gave the grant.
    yield from granted_read({"WHOSE_AUDIT_MAX_ENTRIES": "2"}, tmp_path_factory.mktemp("forgot"))


def test_a_read_whose_grants_cannot_be_rebuilt_is_skipped_and_counted(
    forgotten: dict[str, Any], tmp_path: Path
) -> None:
    # The grant was revoked, and the entry that gave it is gone: what sam's read
    # passed cannot be known, so it is counted, not decided without the grant (which
    # would report no flip where there is one).
    answered = impact(forgotten["base"], without_grants_for_gets(tmp_path))
    assert answered.status_code == 200, answered.text
    report = answered.json()
    assert report["skipped"]["grants_unknown"] == 1
    assert report["decisions"] == 0
    assert sum(report["flips"].values()) == 0
