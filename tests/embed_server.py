"""A real OpenAI-compatible embeddings server on loopback, for the tests.

`POST /v1/embeddings` answers `{"model", "input", "dimensions"?}` as OpenAI does (fewer
`dimensions`: the first components, at unit length), with a real model:
all-MiniLM-L6-v2 (tests/models.py) run by onnxruntime and the `tokenizers` library
directly (mean pooling, unit length), independently of the sidecar's own loader. So
the sidecar's remote embedder is tested against a server that really embeds, and the
two paths to the same model check each other.

Faults are the server's own behaviour, set over `POST /control` (never a mock of the
client): answer slowly, answer with an HTTP status, answer one vector short, or
vectors of another length; `GET /control` says how many requests and texts came in.

    python -m tests.embed_server --port 8089 --model-dir /path/to/all-MiniLM-L6-v2
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import onnxruntime
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from tokenizers import Tokenizer

from tests.conftest import free_port, stop, wait_until_ready

MODEL_NAME = "all-minilm-l6-v2"
API_KEY = "sk-test-" + "k" * 24


class Model:
    def __init__(self, folder: Path) -> None:
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(256)
        self.tokenizer.enable_padding()
        self.session = onnxruntime.InferenceSession(str(folder / "model.onnx"))

    def embed(self, texts: list[str]) -> list[list[float]]:
        encoded = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        inputs = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        [tokens] = self.session.run(["last_hidden_state"], inputs)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (tokens * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
        return [[float(x) for x in row] for row in pooled]


def unit(vector: list[float]) -> list[float]:
    norm = float(np.linalg.norm(vector)) or 1.0
    return [x / norm for x in vector]


@dataclass
class Behaviour:
    delay_s: float = 0.0
    status: int = 200
    short: bool = False  # one vector fewer than texts
    dim: int | None = None  # vectors cut to this length
    body: Any = None  # answered as it is, in place of the vectors (a malformed answer)
    requests: int = 0
    texts: list[int] = field(default_factory=list)  # texts per request


def app(model: Model, api_key: str | None) -> FastAPI:
    api = FastAPI()
    behaviour = Behaviour()

    @api.post("/v1/embeddings")
    async def embeddings(request: Request) -> JSONResponse:
        behaviour.requests += 1
        if api_key and request.headers.get("authorization") != f"Bearer {api_key}":
            return JSONResponse({"error": {"message": "invalid api key"}}, status_code=401)
        body = await request.json()
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        behaviour.texts.append(len(texts))
        if body.get("model") != MODEL_NAME:
            return JSONResponse({"error": {"message": "model not found"}}, status_code=404)
        if behaviour.delay_s:
            await asyncio.sleep(behaviour.delay_s)
        if behaviour.status != 200:
            return JSONResponse({"error": {"message": "injected"}}, status_code=behaviour.status)
        if behaviour.body is not None:
            return JSONResponse(behaviour.body)
        vectors = await asyncio.to_thread(model.embed, texts)
        dimensions = body.get("dimensions")
        if dimensions is not None:
            # As OpenAI's `dimensions`: the first components, at unit length again.
            if not 0 < dimensions <= len(vectors[0]):
                message = f"dimensions must be at most {len(vectors[0])}"
                return JSONResponse({"error": {"message": message}}, status_code=400)
            vectors = [unit(v[:dimensions]) for v in vectors]
        if behaviour.dim is not None:
            vectors = [v[: behaviour.dim] for v in vectors]
        if behaviour.short:
            vectors = vectors[:-1]
        data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
        return JSONResponse({"object": "list", "data": data, "model": MODEL_NAME})

    @api.post("/control")
    async def control(request: Request) -> dict[str, Any]:
        changes = await request.json()
        for key, value in changes.items():
            setattr(behaviour, key, value)
        return {"ok": True}

    @api.get("/control")
    async def stats() -> dict[str, Any]:
        return {"requests": behaviour.requests, "texts": behaviour.texts}

    return api


@dataclass
class EmbedServer:
    url: str  # the base URL: WHOSE_EMBED_URL
    process: subprocess.Popen[bytes]

    def control(self, **changes: Any) -> None:
        defaults = {"delay_s": 0.0, "status": 200, "short": False, "dim": None, "body": None}
        httpx.post(
            self.url.removesuffix("/v1") + "/control", json=defaults | changes
        ).raise_for_status()

    def stats(self) -> dict[str, Any]:
        answer: dict[str, Any] = httpx.get(self.url.removesuffix("/v1") + "/control").json()
        return answer


@contextmanager
def serving(model_dir: Path, log: Path, api_key: str | None = API_KEY) -> Iterator[EmbedServer]:
    port = free_port()
    command = [sys.executable, "-m", "tests.embed_server", "--port", str(port)]
    command += ["--model-dir", str(model_dir), *(["--api-key", api_key] if api_key else [])]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until_ready(f"http://127.0.0.1:{port}/control", process, log)
        yield EmbedServer(f"http://127.0.0.1:{port}/v1", process)
    finally:
        stop(process)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--api-key")
    args = parser.parse_args()
    served = app(Model(args.model_dir), args.api_key)
    uvicorn.run(served, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
