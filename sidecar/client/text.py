"""An answer as the text a model reads: what an agent pastes into its prompt.

The MCP tools hand a model exactly this (answers/readout.py): the verdict in words,
then each item's attribution sentence with what it may be used as and its obligations,
never the writer's own wording. An abstention says so and nothing else.
"""

from __future__ import annotations

from sidecar.answers import readout
from sidecar.messages import (
    HistoryResponse,
    MemoryResponse,
    PropositionResponse,
    RecallResponse,
    StoredRecords,
)

ApiAnswer = RecallResponse | PropositionResponse | MemoryResponse | HistoryResponse | StoredRecords


def as_text(answer: ApiAnswer) -> str:
    """Any answer of the native API, worded for a model."""
    if isinstance(answer, RecallResponse):
        return readout.recall(answer)
    if isinstance(answer, PropositionResponse):
        return readout.propositions(answer)
    if isinstance(answer, MemoryResponse):
        return readout.memory(answer)
    if isinstance(answer, HistoryResponse):
        return readout.history(answer)
    return readout.stored(answer)
