"""jev_shared: typed decisions (choice, score, noul) as probability distributions from any chat model."""

from typing import TYPE_CHECKING

from .answers import Answer, ChoiceAnswer, NoulAnswer, ScoreAnswer, SystemOneResponse, Usage, answer_confidence
from .client import AsyncSystemOneClient, SystemOneClient
from .decision_band import Band, band_for
from .decision_sets import DecisionSets, SetReport
from .errors import (
    ClientCapabilityError,
    DecisionTimeoutError,
    FieldRefusedError,
    IncompleteAnswerError,
    InvalidQuestionError,
    JevError,
    LabelReadoutError,
    MalformedAnswerError,
    ModelRefusalError,
    ProviderError,
    UnsupportedMethodError,
    wire_error,
)
from .memory import Memory, MemoryFileWarning
from .options import Options
from .pair import ClientPair
from .preparation import Preparation
from .questions import MAX_CHOICE_OPTIONS, MAX_SINGLE_TOKEN_LABELS, TOKEN_METHODS, Choice, Example, Noul, Score
from .sdk import openai_client

__all__ = [
    "SystemOneClient", "AsyncSystemOneClient", "Choice", "Score", "Noul", "Example",
    "ChoiceAnswer", "ScoreAnswer", "NoulAnswer", "Answer", "SystemOneResponse", "Usage", "answer_confidence",
    "JevError", "InvalidQuestionError", "UnsupportedMethodError", "ClientCapabilityError", "LabelReadoutError",
    "MalformedAnswerError", "ModelRefusalError", "IncompleteAnswerError", "ProviderError", "DecisionTimeoutError",
    "FieldRefusedError", "wire_error", "MAX_SINGLE_TOKEN_LABELS", "MAX_CHOICE_OPTIONS", "TOKEN_METHODS", "ClientPair",
    "Memory", "MemoryFileWarning", "Options", "Preparation", "DecisionSets", "SetReport", "Band", "band_for",
    "openai_client", "decide_batch", "adecide_batch", "stream_batch", "astream_batch", "BatchResult", "BatchTotals", "ItemResult",
]
__version__ = "0.1.0"

if TYPE_CHECKING:  # the batch names for type checkers; at run time they load on first use (below)
    from .batch import BatchResult, BatchTotals, ItemResult, adecide_batch, astream_batch, decide_batch, stream_batch

#: Re-exported from the batch package above the engine, loaded on first use (the engine never imports it).
_BATCH_NAMES = frozenset({"decide_batch", "adecide_batch", "stream_batch", "astream_batch", "BatchResult",
                          "BatchTotals", "ItemResult"})


def __getattr__(name: str) -> object:
    if name in _BATCH_NAMES:
        import importlib

        return getattr(importlib.import_module("jev_shared.batch"), name)
    raise AttributeError(f"module 'jev_shared' has no attribute {name!r}")
