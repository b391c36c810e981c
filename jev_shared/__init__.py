"""jev_shared: typed decisions (choice, score, noul) as probability distributions from any chat model."""

from .answers import Answer, ChoiceAnswer, NoulAnswer, ScoreAnswer, SystemOneResponse, Usage, answer_confidence
from .batch import BatchResult, BatchTotals, ItemResult, adecide_batch, astream_batch, decide_batch, stream_batch
from .client import AsyncSystemOneClient, SystemOneClient
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
)
from .memory import Memory, MemoryFileWarning
from .pair import ClientPair
from .preparation import Preparation
from .questions import MAX_CHOICE_OPTIONS, MAX_SINGLE_TOKEN_LABELS, TOKEN_METHODS, Choice, Example, Noul, Score

__all__ = [
    "SystemOneClient", "AsyncSystemOneClient", "Choice", "Score", "Noul", "Example",
    "ChoiceAnswer", "ScoreAnswer", "NoulAnswer", "Answer", "SystemOneResponse", "Usage", "answer_confidence",
    "JevError", "InvalidQuestionError", "UnsupportedMethodError", "ClientCapabilityError", "LabelReadoutError",
    "MalformedAnswerError", "ModelRefusalError", "IncompleteAnswerError", "ProviderError", "DecisionTimeoutError",
    "FieldRefusedError", "MAX_SINGLE_TOKEN_LABELS", "MAX_CHOICE_OPTIONS", "TOKEN_METHODS", "ClientPair",
    "Memory", "MemoryFileWarning", "Preparation",
    "decide_batch", "adecide_batch", "stream_batch", "astream_batch", "BatchResult", "BatchTotals", "ItemResult",
]
__version__ = "0.1.0"
