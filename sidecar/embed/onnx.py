"""An ONNX embedding model in a local folder, run in-process by fastembed.

The folder holds what a sentence-transformers export holds: `model.onnx` (or
`onnx/model.onnx`), `tokenizer.json`, `config.json`, `special_tokens_map.json`,
`tokenizer_config.json`, and optionally `1_Pooling/config.json`, which says how token
vectors become one (mean or CLS; mean when absent). A model fastembed knows by name
(`WHOSE_EMBED_MODEL=BAAI/bge-small-en-v1.5`) is loaded with fastembed's own settings
for it, from the folder; any other is registered as a custom model. fastembed is told
the folder and to use local files only: nothing is ever downloaded, at start or at
request time, and a folder that lacks a file refuses to start.

Needs the `onnx` extra (`pip install 'whose[onnx]'`: fastembed and onnxruntime).
Inference runs in a worker thread (onnxruntime releases the interpreter while it runs).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sidecar.embed import EmbeddingUnavailable, EmbedPurpose

if TYPE_CHECKING:
    from fastembed import TextEmbedding
    from fastembed.common.model_description import PoolingType

log = logging.getLogger(__name__)

_MODEL_FILES = ("model.onnx", "onnx/model.onnx")
# A custom model is registered in fastembed's process-wide table under this prefix.
_CUSTOM = "whose-local/"


class OnnxEmbedder:
    def __init__(self, folder: Path, model: str | None, dim: int, *, batch: int = 64) -> None:
        self.folder = folder
        self.model_name = model or folder.name
        self._dim = dim
        self.batch = batch
        self._model: TextEmbedding | None = None

    @property
    def name(self) -> str:
        return f"onnx:{self.model_name}"

    @property
    def dim(self) -> int:
        return self._dim

    def load(self) -> None:
        """Load the model (seconds: call it off the event loop, once, at start).
        ValueError, in one line, when the folder or the model is not what was configured."""
        try:
            from fastembed import TextEmbedding
        except ImportError as exc:
            raise ValueError(
                f"WHOSE_EMBED_MODEL_DIR needs fastembed: install whose[onnx] ({exc.name} missing)"
            ) from None
        if not self.folder.is_dir():
            raise ValueError(f"WHOSE_EMBED_MODEL_DIR {self.folder} is not a folder")
        known = {m["model"].lower() for m in TextEmbedding.list_supported_models()}
        name = self.model_name
        if name.lower() not in known:
            name = _register(TextEmbedding, self.folder, self.model_name, self._dim)
        try:
            model = TextEmbedding(
                model_name=name,
                specific_model_path=str(self.folder),
                local_files_only=True,
                lazy_load=False,
            )
            probe = next(iter(model.passage_embed(["dimension probe"])))
        except Exception as exc:
            raise ValueError(
                f"cannot load the ONNX model in {self.folder}: {type(exc).__name__}: {exc}"
            ) from None
        if len(probe) != self._dim:
            raise ValueError(
                f"the model in {self.folder} returns {len(probe)}-dimension vectors, not "
                f"{self._dim}: set WHOSE_EMBED_DIM={len(probe)}"
            )
        self._model = model

    async def close(self) -> None:
        self._model = None

    async def embed_batch(self, texts: Sequence[str], purpose: EmbedPurpose) -> list[list[float]]:
        model = self._model
        if model is None:
            raise EmbeddingUnavailable("the model is not loaded", ["model_not_loaded"])
        items = list(texts)

        def run() -> list[list[float]]:
            if purpose == "query":
                found = model.query_embed(items, batch_size=self.batch)
            else:
                found = model.passage_embed(items, batch_size=self.batch)
            return [[float(x) for x in vector] for vector in found]

        try:
            return await asyncio.to_thread(run)
        except Exception as exc:
            log.exception("the ONNX model failed")
            raise EmbeddingUnavailable(f"model failed: {exc}", ["model_error"]) from None


def _register(text_embedding: type[TextEmbedding], folder: Path, model: str, dim: int) -> str:
    """Register the folder's model with fastembed as a custom model; its name there."""
    from fastembed.common.model_description import ModelSource, PoolingType

    name = _CUSTOM + model
    if name.lower() in {m["model"].lower() for m in text_embedding.list_supported_models()}:
        return name
    model_file = next((f for f in _MODEL_FILES if (folder / f).is_file()), None)
    if model_file is None:
        raise ValueError(f"no model.onnx (or onnx/model.onnx) in {folder}")
    text_embedding.add_custom_model(
        model=name,
        pooling=_pooling(folder, PoolingType),
        normalization=True,
        # Never fetched: the model is loaded from `specific_model_path` with local files
        # only. fastembed requires a source to be named.
        sources=ModelSource(hf=name),
        dim=dim,
        model_file=model_file,
    )
    return name


def _pooling(folder: Path, pooling: type[PoolingType]) -> PoolingType:
    """Mean pooling unless the sentence-transformers pooling config says CLS."""
    config = folder / "1_Pooling" / "config.json"
    if config.is_file():
        modes = json.loads(config.read_text())
        if modes.get("pooling_mode_cls_token") and not modes.get("pooling_mode_mean_tokens"):
            return pooling.CLS
    return pooling.MEAN
