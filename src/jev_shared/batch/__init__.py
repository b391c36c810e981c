"""Batch decisions, an application on the engine's public API: many states, the same questions.

:mod:`.run` is the API (``decide_batch``, ``stream_batch`` and their async twins), :mod:`.files`
the input files, the resumable answer log and the cost preview, :mod:`.report` the summary and the
review queue. ``jev decide --input`` (:mod:`jev_shared.cli.decide_batch`) drives them from the shell.
"""

from .run import (
    BatchResult,
    BatchTotals,
    Item,
    ItemResult,
    adecide_batch,
    as_item,
    astream_batch,
    check_questions,
    decide_batch,
    error_body,
    stream_batch,
)

__all__ = ["decide_batch", "adecide_batch", "stream_batch", "astream_batch", "BatchResult", "BatchTotals",
           "ItemResult", "Item", "as_item", "check_questions", "error_body"]
