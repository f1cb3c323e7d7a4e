"""The shipped policy's vocabulary (rego/whose/vocabulary/data.json), for pure tests."""

from __future__ import annotations

import json

from sidecar.answers.wording import Vocabulary
from tests.conftest import POLICY_DIR

VOCABULARY = Vocabulary.parse(
    json.loads((POLICY_DIR / "whose" / "vocabulary" / "data.json").read_text())
)
