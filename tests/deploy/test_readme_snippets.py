"""The README's and the docs' snippets, run as written against a sidecar like `make serve`'s.

A snippet is the fenced block after a `<!-- snippet: NAME -->` line, in README.md or a
page of docs/. Shell snippets run in bash, each `curl` against a served sidecar, and what
each prints is compared with the `# {...}` comment under it (`…` stands for what varies:
ids, times, the rest of a long answer). Python snippets run as written: every name they
use they define (the token from the key `make serve` was given, the embedder the
collection's vectors were made with). The MCP host configs are read as a host reads them
and connected to with the real MCP client. The only substitutions: the sidecar's port
(8080 in the docs), the checkout's path, a data folder, and the principal a snippet asks
as. Every other fenced block is checked too: a Python block must be one of these
snippets, and every shell command names a program, make target or file that exists.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import httpx2
import jwt
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent
from qdrant_client import QdrantClient

from sidecar.client import DevIdentity
from sidecar.client.langgraph import WhoseStore
from tests.conftest import OPA_BINARY, POLICY_DIR, REPO, as_
from tests.embed_server import API_KEY as EMBED_KEY
from tests.embed_server import serving
from tests.factories import served as served_sidecar
from tests.qdrant_server import start_node

pytestmark = pytest.mark.filterwarnings(
    "ignore:Api key is used with an insecure connection:UserWarning"
)

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SECRET = "readme-snippets-hs256-secret-32-bytes!!"
SERVED = "http://127.0.0.1:8080"
ATTRIBUTED = "alice believes that the launch is October 17 — source private-session-42"


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    name: str | None
    language: str
    code: str


def blocks() -> list[Block]:
    found = []
    for page in PAGES:
        text = page.read_text()
        fences = r"(?:<!-- snippet: ([\w-]+) -->\n)?^```(\w*)\n(.*?)^```"
        for match in re.finditer(fences, text, re.S | re.M):
            line = text[: match.start()].count("\n") + 1
            found.append(Block(page, line, match.group(1), match.group(2), match.group(3)))
    return found


def snippet(name: str) -> str:
    named = [b for b in blocks() if b.name == name]
    assert len(named) == 1, f"{len(named)} snippets named {name!r}"
    return named[0].code


# Every named snippet and the test that runs it (a new snippet must be added here).
RUN = {
    "bob-store": "test_see_it_refuse_bob",
    "bob-alice-asks": "test_see_it_refuse_bob",
    "bob-asks": "test_see_it_refuse_bob",
    "bob-flattened": "test_see_it_refuse_bob",
    "extractor": "test_an_extractor_posts_what_was_said",
    "audit-explain": "test_the_audit_log_and_explain_say_why",
    "erase-one": "test_erasure_snippets",
    "erasure-request": "test_erasure_snippets",
    "sally-anne": "test_sally_anne_snippet",
    "conversation-story": "test_conversation_story_snippet",
    "proxy-serve": "test_the_set_up_commands_exist",
    "client-install": "test_the_set_up_commands_exist",
    "langchain": "test_langchain_snippet_writes_retrieves_and_deletes",
    "readme-drop-in": "test_readme_drop_in_snippet",
    "llamaindex": "test_llamaindex_snippet",
    "llamaindex-ingest": "test_llamaindex_ingest_snippet",
    "haystack": "test_haystack_snippet",
    "haystack-ingest": "test_haystack_ingest_snippet",
    "python-client": "test_python_client_snippet",
    "langgraph": "test_langgraph_snippet",
    "mcp-http": "test_mcp_http_config",
    "mcp-stdio": "test_mcp_stdio_config",
    "labeling-config": "test_labeling_snippets",
    "labeling-input": "test_labeling_snippets",
    "labeling-answer": "test_labeling_snippets",
    "collections-config": "test_collections_snippets",
    "collections-input": "test_collections_snippets",
    "collections-answer": "test_collections_snippets",
    "adopt": "test_adopt_snippet",
    "own-llamaindex": "test_own_collection_snippets",
    "own-haystack": "test_own_collection_snippets",
    "own-langchain": "test_own_collection_snippets",
    "own-mem0": "test_own_mem0_snippet",
    "consent-store": "test_consent_snippets",
    "consent-mother-granted": "test_consent_snippets",
    "consent-sister-granted": "test_consent_snippets",
    "consent-sister-recalls": "test_consent_snippets",
    "consent-after-friday": "test_consent_snippets",
    "consent-revoke-mother": "test_consent_snippets",
    "forget-told": "test_forgetting_snippets",
    "forget-rule": "test_forgetting_snippets",
    "forget-restated": "test_forgetting_snippets",
    "forget-recall": "test_forgetting_snippets",
    "forget-temporary": "test_forgetting_snippets",
    "forget-by-content": "test_forgetting_snippets",
    "forget-after": "test_forgetting_snippets",
}


def test_every_snippet_is_run_and_every_python_block_is_a_snippet() -> None:
    named = [b.name for b in blocks() if b.name]
    assert len(named) == len(set(named)), "two snippets share a name"
    assert set(named) == set(RUN), set(named) ^ set(RUN)
    assert set(RUN.values()) <= set(globals()), "a snippet's test is missing"
    for block in blocks():
        if block.language == "python":
            assert block.name, f"{block.page.name}:{block.line}: a Python block no test runs"


# --- shell: what each command prints -------------------------------------------------


def squeezed(text: str) -> str:
    """JSON as curl prints it and as the docs wrap it: no space after , : [ { or
    before ] }, other runs of white space one space."""
    text = re.sub(r"\s+", " ", text)
    text = re.sub(r"([,:\[{]) ", r"\1", text)
    return re.sub(r" ([\]}])", r"\1", text).strip()


def expected_answers(code: str) -> list[str]:
    """The answers a block's comments show, in order: a comment line starting `# {` and
    the indented comment lines under it."""
    answers: list[str] = []
    current: list[str] | None = None
    for line in code.splitlines():
        if line.startswith(("# {", "# [")):
            current = [line[2:]]
            answers.append("")
        elif current is not None and re.match(r"#\s{2,}\S", line):
            current.append(line[1:])
        else:
            current = None
        if current is not None:
            answers[-1] = " ".join(current)
    return answers


def matches(expected: str, actual: str) -> bool:
    """Each part of `expected` between two `…` is in `actual`, in order."""
    at = 0
    for part in (p.strip() for p in re.split(r"…|\.\.\.", squeezed(expected))):
        if not part:
            continue
        found = squeezed(actual).find(part, at)
        if found < 0:
            return False
        at = found + len(part)
    return True


def run_shell(code: str, base: str) -> list[str]:
    """The block in bash against `base`, each command's output on its own: an `echo`
    of a marker after every line that is followed by an answer comment."""
    lines = code.replace("localhost:8080", base.removeprefix("http://")).splitlines()
    script = []
    for i, line in enumerate(lines):
        script.append(line)
        following = lines[i + 1] if i + 1 < len(lines) else ""
        if following.startswith(("# {", "# [")):
            script.append("echo; echo '@@answer@@'")
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", "\n".join(script)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split("@@answer@@")[:-1]


def check_shell(name: str, base: str, replace: tuple[str, str] | None = None) -> list[str]:
    """Run snippet `name` against `base`, its answers compared with its comments;
    `replace`: one literal swapped in both (a date the test moves)."""
    code = snippet(name)
    if replace is not None:
        code = code.replace(*replace)
    expected = expected_answers(code)
    actual = run_shell(code, base)
    assert len(actual) == len(expected) > 0, (name, actual)
    for shown, got in zip(expected, actual, strict=True):
        assert matches(shown, got), f"{name}: the docs show\n{shown}\nit answered\n{got}"
    return actual


def test_the_comparison_can_fail() -> None:
    answer = '{"verdict":"abstain","items":[],"decision_id":"d1"}'
    assert matches('{"verdict":"abstain","items":[],…}', answer)
    assert not matches('{"verdict":"attributed",…}', answer)
    assert not matches('{"items":[],"verdict":"abstain"…}', answer)  # order matters
    shown = expected_answers('curl x\n# {"a":1,\n#   "b":2}\n# a note\n')
    assert [squeezed(a) for a in shown] == ['{"a":1,"b":2}']


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`make serve` with a key, as docs/rag-proxy.md sets it up."""
    with served_sidecar(
        tmp_path_factory.mktemp("readme"), {"WHOSE_JWT_HS256_SECRET": SECRET}
    ) as base:
        yield base


def test_see_it_refuse_bob(served: str) -> None:
    """The README's story, each command as written and each answer as shown."""
    for name in ("bob-store", "bob-alice-asks", "bob-asks", "bob-flattened"):
        check_shell(name, served)


def test_an_extractor_posts_what_was_said(served: str) -> None:
    check_shell("extractor", served)


def test_the_audit_log_and_explain_say_why(served: str) -> None:
    check_shell("audit-explain", served)


def test_labeling_snippets(tmp_path: Path) -> None:
    # docs/policies.md: the team's config set in a copy of the policy, the documents asked
    # about as written, the answer as shown.
    policy = tmp_path / "rego"
    shutil.copytree(POLICY_DIR, policy)
    config = policy / "whose" / "config" / "data.json"
    config.write_text(
        json.dumps(json.loads(config.read_text()) | json.loads(snippet("labeling-config")))
    )
    command = [str(OPA_BINARY), "eval", "--format", "raw", "--stdin-input", "--data", str(policy)]
    command += ["--ignore", "*_test.rego", "data.whose.labeling.decisions"]
    answered = subprocess.run(
        command, input=snippet("labeling-input"), capture_output=True, text=True, check=True
    )
    assert json.loads(answered.stdout) == json.loads(snippet("labeling-answer"))
    # The shipped policy maps none of those keys: every document is refused.
    shipped = subprocess.run(
        [*command[:6], str(POLICY_DIR), *command[7:]],
        input=snippet("labeling-input"),
        capture_output=True,
        text=True,
        check=True,
    )
    assert {tuple(d.get("reasons", ())) for d in json.loads(shipped.stdout)} == {
        ("missing_metadata:audience", "missing_metadata:source")
    }


def test_collections_snippets(tmp_path: Path) -> None:
    # docs/policies.md: the team's admin roles set in a copy of the policy, bob's drop of
    # alice's collection asked as written, the answer as shown.
    policy = tmp_path / "rego"
    shutil.copytree(POLICY_DIR, policy)
    config = policy / "whose" / "config" / "data.json"
    config.write_text(
        json.dumps(json.loads(config.read_text()) | json.loads(snippet("collections-config")))
    )

    def decided(folder: Path) -> Any:
        command = [str(OPA_BINARY), "eval", "--format", "raw", "--stdin-input"]
        command += ["--data", str(folder), "--ignore", "*_test.rego"]
        answered = subprocess.run(
            [*command, "data.whose.collections.decision"],
            input=snippet("collections-input"),
            capture_output=True,
            text=True,
            check=True,
        )
        return json.loads(answered.stdout)

    assert decided(policy) == json.loads(snippet("collections-answer"))
    # The shipped policy: `admin` alone.
    assert decided(POLICY_DIR)["reasons"] == ["not_collection_creator", "role_required:admin"]


def test_adopt_snippet(tmp_path: Path) -> None:
    """docs/operations.md: a team's collection on a Qdrant server keyed as the docs say
    (two documents with readers, one without), adopted by the commands as written, each
    run's summary as the page shows it. Substituted: the server's address, a data folder."""
    from qdrant_client import QdrantClient
    from qdrant_client.http import models as qm

    key = "adopt-snippet-qdrant-key"
    node = start_node(tmp_path / "qdrant", api_key=key)
    try:
        raw = QdrantClient(url=node.url, api_key=key, check_compatibility=False)
        raw.create_collection("kb", vectors_config=qm.VectorParams(size=4, distance="Cosine"))
        told = [["alice", "bob"], ["alice"], None]
        raw.upsert(
            "kb",
            [
                qm.PointStruct(
                    id=i + 1,
                    vector=[1.0, float(i), 0.5, 0.25],
                    payload={
                        "page_content": f"note {i}",
                        "metadata": {"source": "wiki"} | ({"audience": a} if a else {}),
                    },
                )
                for i, a in enumerate(told)
            ],
            wait=True,
        )
        raw.close()
        code = snippet("adopt").replace("http://127.0.0.1:6333", node.url)
        env = os.environ | {"QDRANT_API_KEY": key, "WHOSE_DATA_DIR": str(tmp_path / "data")}
        env["PYTHONPATH"] = str(REPO)  # this checkout's sidecar, whichever the venv installed
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", code],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            timeout=180,
        )
    finally:
        node.stop()
    assert done.returncode == 0, done.stderr
    page = squeezed((REPO / "docs" / "operations.md").read_text())
    shown = re.search(r"\(`(dry run 'kb'.*?)`\)", page)
    assert shown is not None
    lines = done.stdout.splitlines()
    assert squeezed(lines[0]) == shown.group(1)
    assert lines[1].strip() == "unlabeled missing_metadata:audience: 1 (e.g. 3)"
    assert "in data/adopt/acme-kb.json" in page
    assert (tmp_path / "data" / "adopt" / "acme-kb.json").exists()
    finished = [line for line in lines if line.startswith("adopted 'kb'")]
    assert [f.rsplit("; ", 1)[1] for f in finished] == [
        "stopped by --max: run again to go on",
        "done",
    ]
    assert "2 written, 0 unchanged, 1 unlabeled, 0 refused" in finished[1]


def test_erasure_snippets(tmp_path: Path) -> None:
    """Erasing one record, then an officer's request for everything of Alice's, on a
    sidecar of their own (the README's belief stored first, and something she said)."""
    with served_sidecar(tmp_path / "sidecar") as base:
        check_shell("bob-store", base)
        said = {
            "speaker": "alice",
            "source_id": "private-session-42",
            "participants": ["alice"],
            "claims": [{"proposition": {"text": "the launch is October 17"}}],
        }
        stored = httpx.post(f"{base}/v1/observations", json=said, headers=as_("alice"))
        assert stored.status_code == 201, stored.text
        check_shell("erase-one", base)
        [progress] = check_shell("erasure-request", base)
    assert json.loads(progress)["erased"] >= 1  # what Alice said


# The end docs/consent.md gives the sister's grant ("until Friday").
FRIDAY = "2026-12-11T23:59:59Z"


def test_consent_snippets(tmp_path: Path) -> None:
    """docs/consent.md: Maria's household on a sidecar of its own. The only
    substitution: "Friday" is moved to a few seconds ahead (a served sidecar runs on
    the real clock), the sister's recall made before it and the next one after it has
    passed; with no write in between."""
    with served_sidecar(tmp_path / "sidecar") as base:
        started = time.monotonic()
        check_shell("consent-store", base)
        check_shell("consent-mother-granted", base)
        # Room for the grant and the recall before it ends: sized from the two steps just
        # taken (as many as come before Friday), so a loaded machine gets a wider margin.
        taken = time.monotonic() - started
        margin = timedelta(seconds=2 + 4 * taken)
        friday = (datetime.now(UTC) + margin).replace(microsecond=0) + timedelta(seconds=1)
        moved = (FRIDAY, friday.isoformat().replace("+00:00", "Z"))
        check_shell("consent-sister-granted", base, moved)
        [recalled] = check_shell("consent-sister-recalls", base)
        assert "root canal" not in recalled  # the clinical record: no grant names it
        assert datetime.now(UTC) < friday, "the recall before Friday came after it"
        time.sleep(max(0.0, (friday - datetime.now(UTC)).total_seconds()) + 0.5)
        check_shell("consent-after-friday", base)
        check_shell("consent-revoke-mother", base)
        # Maria still recalls both of her records.
        mine = httpx.post(
            f"{base}/v1/recall",
            json={"query": "the dentist appointment", "limit": 10},
            headers=as_("maria"),
        )
        assert len(mine.json()["items"]) == 2, mine.text


def test_forgetting_snippets(tmp_path: Path) -> None:
    """docs/forgetting.md's household, in order, on a sidecar of its own: the PIN is in
    no answer after the rule, the codes in none after the officer's request."""
    with served_sidecar(tmp_path / "sidecar") as base:
        told, rule, restated, alice, _, by_content, bob = (
            check_shell(name, base)[0]
            for name in (
                "forget-told",
                "forget-rule",
                "forget-restated",
                "forget-recall",
                "forget-temporary",
                "forget-by-content",
                "forget-after",
            )
        )
    assert "5532" in told
    for answer in (rule, restated, alice):
        assert "5532" not in answer
    assert json.loads(by_content)["erased"] == 2
    assert "4471" not in bob
    assert "9120" not in bob


def test_the_set_up_commands_exist() -> None:
    for name in ("proxy-serve", "client-install"):
        done = subprocess.run(["bash", "-n", "-c", snippet(name)], capture_output=True)
        assert done.returncode == 0, done.stderr


# Programs the docs may name that are not ours (they install separately, or run in a
# deployment): anything else must be a make target, a file of the checkout, or .venv/bin.
EXTERNAL = {
    "curl", "docker", "kubectl", "kill", "openssl", "python3", "python3.11", "claude",
    "mkdir", "cd", "export", "echo", "for", "done", "do", "sleep", "cat", "ls", "sqlite3",
    "sha256sum", "tar", "opa", "qdrant", "run_node", "marble", "turn", "set", "then", "fi", "if",
}  # fmt: skip


def commands(code: str) -> Iterator[str]:
    """The first word of each command of a shell block (lines inside a quoted string and
    variable assignments before a command passed over; `name=$(program …)` is the
    program)."""
    inside = False
    for line in code.replace("\\\n", " ").splitlines():
        starts = line.strip() and not line.startswith((" ", "\t", "}", "#"))
        if starts and not inside:
            try:
                words = shlex.split(line, comments=True)
            except ValueError:  # a quote closed on a later line
                words = line.split()
            while words and re.fullmatch(r"[A-Za-z_]\w*=.*", words[0], re.S):
                value = words.pop(0).split("=", 1)[1]
                if value.startswith("$("):
                    words.insert(0, value[2:])
                    break
            if words:
                yield words[0].split("(")[0]
        if inside or not line.lstrip().startswith("#"):
            inside ^= line.count("'") % 2 == 1


def targets() -> set[str]:
    makefile = (REPO / "Makefile").read_text()
    return set(re.findall(r"^([\w-]+):", makefile, re.M))


@pytest.mark.parametrize("block", [b for b in blocks() if b.language in ("sh", "bash")])
def test_every_shell_command_exists(block: Block) -> None:
    where = f"{block.page.name}:{block.line}"
    for program in commands(block.code):
        if program == "make":
            continue
        assert program != "whose", f"{where}: `whose` is .venv/bin/whose after `make serve`"
        if program.startswith((".venv/bin/", "agent-env/bin/")):
            tool = program.removeprefix("agent-env/bin/").removeprefix(".venv/bin/")
            assert tool in {"pip", "python"} or (REPO / ".venv" / "bin" / tool).exists(), where
        elif "/" in program:
            assert (REPO / program).exists(), f"{where}: {program} does not exist"
        else:
            assert program in EXTERNAL or shutil.which(program), f"{where}: {program}?"
    for made in re.findall(r"\bmake ([\w-]+)", block.code):
        assert made in targets(), f"{where}: no make target {made!r}"
    assert "pip install 'whose" not in block.code, f"{where}: whose is not on an index"


def test_the_commands_parse_can_fail() -> None:
    code = (
        "curl -s x -d '{\n  \"a\": 1}'\n# Alice's\nWHOSE_X=1 .venv/bin/whose serve \\\n"
        "  --dev\nwhose demo\nid=$(curl -s y)\n"
    )
    assert list(commands(code)) == ["curl", ".venv/bin/whose", "whose", "curl"]


# --- Python: run as written ------------------------------------------------------------


def run(code: str, base: str, who: str = "alice") -> dict[str, Any]:
    assert SERVED in code
    code = code.replace(SERVED, base).replace('{"sub": "alice"', f'{{"sub": "{who}"')
    scope: dict[str, Any] = {"__name__": "snippet"}
    exec(compile(code, "<snippet>", "exec"), scope)
    return scope


@pytest.fixture
def keyed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shell `make serve` was started from (docs/rag-proxy.md): its key exported."""
    monkeypatch.setenv("WHOSE_JWT_HS256_SECRET", SECRET)


@pytest.mark.usefixtures("keyed")
@pytest.mark.parametrize(("who", "sees"), [("alice", True), ("bob", False)])
def test_llamaindex_snippet(served: str, who: str, sees: bool) -> None:
    check_shell("bob-store", served)
    texts = [n.node.get_content() for n in run(snippet("llamaindex"), served, who)["nodes"]]
    assert any(t.startswith(ATTRIBUTED) for t in texts) is sees, texts
    assert not any("October 17" in t for t in texts) or sees


@pytest.mark.usefixtures("keyed")
@pytest.mark.parametrize(("who", "sees"), [("alice", True), ("bob", False)])
def test_haystack_snippet(served: str, who: str, sees: bool) -> None:
    check_shell("bob-store", served)
    contents = [d.content for d in run(snippet("haystack"), served, who)["documents"]]
    assert any(c.startswith(ATTRIBUTED) for c in contents) is sees, contents
    assert not any("October 17" in c for c in contents) or sees


def test_python_client_snippet(served: str) -> None:
    scope = run(snippet("python-client"), served)
    told, refused = scope["told"], scope["refused"]
    assert told.verdict == "attributed"
    assert told.items[0].attribution.startswith(ATTRIBUTED)
    assert refused.verdict == "abstain"
    assert refused.items == []
    scope["alice"].close()
    scope["bob"].close()


def test_langgraph_snippet(served: str) -> None:
    scope = run(snippet("langgraph"), served)
    told = "alice believes that the launch is October 17 — source langgraph"
    assert scope["memories"][0].value["whose"]["attribution"].startswith(told)
    assert scope["told"][0].startswith(told)
    # The same store asking as Bob: nothing of Alice's memory.
    bob = WhoseStore(served, dev=DevIdentity("bob", "acme"))
    assert bob.search(("acme", "alice", "memories"), query="when is the launch?") == []
    assert bob.get(("acme", "alice", "memories"), "launch") is None
    bob.close()
    scope["store"].close()


@pytest.mark.usefixtures("keyed")
def test_readme_drop_in_snippet(served: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = snippet("readme-drop-in")
    run(code, served)
    printed = capsys.readouterr().out.strip()
    # The answer the README shows, as printed: whose the claim is, from its source.
    assert printed == expected_comment(code)


def expected_comment(code: str) -> str:
    return code.rstrip().splitlines()[-1].removeprefix("# ")


@pytest.mark.usefixtures("keyed")
def test_langchain_snippet_writes_retrieves_and_deletes(served: str) -> None:
    scope = run(snippet("langchain"), served)
    found = [d.page_content for d in scope["docs"] if "offsite" in d.page_content]
    assert found
    assert found[0].startswith("alice says that “the offsite is in Lisbon”")
    assert scope["ids"]
    assert scope["store"].get_by_ids(scope["ids"]) == []  # deleted
    info = scope["store"].client.get_collection("kb")
    assert info.config.params.vectors[""].size == 1536  # the stack's own size


@pytest.mark.usefixtures("keyed")
def test_llamaindex_ingest_snippet(served: str) -> None:
    scope = run(snippet("llamaindex-ingest"), served)
    found = [n.node.get_content() for n in scope["nodes"] if "offsite" in n.node.get_content()]
    assert found
    assert found[0].startswith("alice says that “the offsite is in Lisbon”")
    left = scope["index"].as_retriever(similarity_top_k=5).retrieve("where is the offsite?")
    assert not any("offsite" in n.node.get_content() for n in left)


@pytest.mark.usefixtures("keyed")
def test_haystack_ingest_snippet(served: str) -> None:
    scope = run(snippet("haystack-ingest"), served)
    found = [d for d in scope["documents"] if "offsite" in (d.content or "")]
    assert [d.id for d in found] == [scope["offsite"].id]
    assert scope["store"].get_documents_by_id([scope["offsite"].id]) == []


@pytest.mark.usefixtures("keyed")
def test_own_collection_snippets(served: str) -> None:
    """docs/rag-proxy.md, "Your own collections": each library's start, as written, into
    a collection of its own; Alice reads both documents, Bob only the one he may."""
    lisbon = "alice says that “the offsite is in Lisbon”"
    budget = "alice says that “the offsite budget is 40k”"
    bob = QdrantClient(url=served, api_key=user_token("bob"), check_compatibility=False)

    llama = run(snippet("own-llamaindex"), served)
    assert sorted(n.node.get_content()[: len(lisbon)] for n in llama["nodes"]) == sorted(
        [lisbon, budget[: len(lisbon)]]
    )
    seen = bob.scroll("handbook", limit=10)[0]
    assert [
        json.loads((p.payload or {})["_node_content"])["text"][: len(lisbon)] for p in seen
    ] == [lisbon]

    haystack = run(snippet("own-haystack"), served)
    assert {(d.content or "")[: len(lisbon)] for d in haystack["documents"]} == {
        lisbon,
        budget[: len(lisbon)],
    }
    assert all(d.meta["source"] == "offsite.md" for d in haystack["from_offsite"])
    assert len(haystack["from_offsite"]) == 2
    assert bob.count("notes").count == 1

    langchain = run(snippet("own-langchain"), served)
    assert len(langchain["docs"]) == 2
    [only] = langchain["budget"]
    assert only.page_content.startswith(budget)
    assert only.metadata["source"] == "budget.md"
    [shown] = bob.scroll("wiki", limit=10)[0]
    assert (shown.payload or {})["page_content"].startswith(lisbon)
    bob.close()


@pytest.mark.usefixtures("keyed")
# mem0 0.1's own models are written in pydantic 1's style.
@pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20")
def test_own_mem0_snippet(
    served: str, minilm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/rag-proxy.md, mem0: its memory is Alice's, read back as hers; Bob sees none
    of it. The embedder: a real one on loopback, as OPENAI_BASE_URL names it."""
    with serving(minilm, tmp_path / "embed.log") as embedder:
        monkeypatch.setenv("OPENAI_BASE_URL", embedder.url)
        monkeypatch.setenv("OPENAI_API_KEY", EMBED_KEY)
        found = run(snippet("own-mem0"), served)["found"]
    assert found[0]["memory"].startswith("alice says that “I moved to Lisbon in March”")
    assert (found[0]["user_id"], found[0]["role"]) == ("alice", "user")
    bob = QdrantClient(url=served, api_key=user_token("bob"), check_compatibility=False)
    assert bob.scroll("memories", limit=10)[0] == []
    bob.close()


# --- MCP host configs ------------------------------------------------------------------


def user_token(who: str) -> str:
    # As docs/rag-proxy.md mints `user_token` in the shell.
    claims = {"sub": who, "tenant": "acme", "exp": 4102444800}
    return jwt.encode(claims, SECRET)


def text(result: Any) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


async def test_mcp_http_config(served: str) -> None:
    check_shell("bob-store", served)
    config = json.loads(snippet("mcp-http"))["mcpServers"]["whose"]
    assert config["type"] == "http"
    url = config["url"].replace(SERVED, served)
    headers = {
        k: v.replace("<user_token>", user_token("alice")) for k, v in config["headers"].items()
    }
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        recalled = await session.call_tool("recall", {"query": "when is the launch?"})
    assert ATTRIBUTED in text(recalled)


async def test_mcp_stdio_config(tmp_path: Path) -> None:
    raw = snippet("mcp-stdio")
    raw = raw.replace("/path/to/whose/mcp-data", str(tmp_path)).replace("/path/to/whose", str(REPO))
    config = json.loads(raw)["mcpServers"]["whose"]
    server = StdioServerParameters(
        command=config["command"], args=config["args"], env=config.get("env")
    )
    with (tmp_path / "stderr.log").open("w") as errors:
        async with (
            stdio_client(server, errlog=errors) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            remembered = await session.call_tool(
                "remember",
                {
                    "speaker": "alice",
                    "source_id": "private-session-42",
                    "claims": [
                        {
                            "proposition": {"text": "the launch is October 17"},
                            "hedged": True,
                            "confidence": 0.78,
                        }
                    ],
                },
            )
            assert not remembered.is_error, text(remembered)
            recalled = await session.call_tool("recall", {"query": "when is the launch?"})
    # What she said through `remember` is her statement (docs/mcp.md).
    assert "alice said that the launch is October 17 — source private-session-42" in text(recalled)


# --- the theory-of-mind tutorial ---------------------------------------------------------


def test_sally_anne_snippet(served: str) -> None:
    """The story, run by bash and curl as written (its port aside): each answer it
    prints is what the tutorial's comments say, and what they mean is checked too."""
    printed = "".join(check_shell("sally-anne", served))
    answers = [json.loads(a) for a in re.split(r"(?<=\})\s*(?=\{)", printed.strip())]
    witnessed, moved, stage, anne_on_sally, told, heard, sallys, third, minds = answers
    assert [r["observer_id"] for r in witnessed["records"]] == ["sally", "anne"]
    assert len(moved["records"]) == 1
    assert len(stage["records"]) == 2
    [item] = anne_on_sally["items"]
    assert item["attribution"].startswith(
        "anne saw that sally believes that the marble is in the basket"
    )
    assert (item["usable_as"], item["derived_from"]) == (
        "nested_belief",
        witnessed["records"][1]["id"],
    )
    assert told["records"][0]["act"] == "said"
    [item] = heard["items"]
    assert item["attribution"].startswith("sally heard anne say that the marble is in the box")
    assert (item["usable_as"], item["act"]) == ("heard", "heard")
    assert sallys["verdict"] == "conflict"
    assert [i["proposition"]["value"] for i in sallys["items"]] == ["basket"]
    [conflict] = sallys["conflicts"]
    assert {(v["holder"], v["value"], v["usable_as"]) for v in conflict["views"]} == {
        ("sally", "basket", "belief"),
        ("anne", "box", "statement"),
    }
    # Anne's view of Sally's view of hers, and (issue 40) that Sally heard her say it.
    item, told_sally = sorted(third["items"], key=lambda i: "act" in i)
    assert item["attribution"].startswith(
        "anne believes that sally believes that anne believes that the marble is in the box"
    )
    assert item["observed_path"] == ["sally", "anne"]
    assert told_sally["attribution"].startswith(
        "anne believes that sally heard anne say that the marble is in the box"
    )
    assert minds["verdict"] == "answer"
    assert minds["world_state"]["attribution"].startswith("The marble is in the box")
    by_holder = {m["holder"]: m for m in minds["minds"]}
    assert [v["value"] for v in by_holder["anne"]["views"]] == ["box"]
    [sally] = by_holder["anne"]["about"]
    assert (sally["observed"], [v["value"] for v in sally["views"]]) == ("sally", ["basket"])
    [back] = sally["about"]
    assert (back["observed"], [v["value"] for v in back["views"]]) == ("anne", ["basket"])
    assert [v["value"] for v in by_holder["sally"]["views"]] == ["basket"]


# --- the conversations page ---------------------------------------------------------------


def test_conversation_story_snippet(served: str) -> None:
    """Four people, one leaves, two talk: posted with membership events only and raw
    turns; the one who left is asked what she heard and what she thinks the others
    heard and believe. Each answer as the page shows it, and what it means."""
    printed = "".join(check_shell("conversation-story", served))
    answers = [json.loads(a) for a in re.split(r"(?<=\})\s*(?=\{)", printed.strip())]
    opened, said, left, ben, cai, dee_heard, dee_on_ben, dee_on_ana, cai_on_ben = answers
    assert [e["person"] for e in opened["events"]] == ["ana", "ben", "cai", "dee"]
    assert sorted(said["records"][0]["audience"]) == ["ana", "ben", "cai", "dee"]
    assert left["events"][0]["change"] == "leave"
    assert sorted(ben["records"][0]["audience"]) == ["ana", "ben", "cai"]
    assert sorted(cai["records"][0]["audience"]) == ["ana", "ben", "cai"]
    [item] = dee_heard["items"]
    assert item["attribution"].startswith("dee heard ana say that “I put the keys in the drawer”")
    [item] = dee_on_ben["items"]
    assert item["attribution"].startswith("dee believes that ben heard ana say that")
    [item] = dee_on_ana["items"]
    assert item["attribution"].startswith("dee believes that ana believes that")
    heard = sorted(i["attribution"].split(" say that")[0] for i in cai_on_ben["items"])
    assert heard == ["cai believes that ben heard ana", "cai believes that ben heard cai"]
