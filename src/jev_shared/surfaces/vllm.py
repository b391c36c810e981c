"""vLLM's OpenAI-compatible server (``api="vllm"``): Chat Completions, reading the labels' own token ids.

vLLM returns the log-probabilities of token ids the request names, whatever their rank:
``SamplingParams.logprob_token_ids`` (vllm-project/vllm PR #34539, "Generative Scoring", merged 2026-02, which
also added the ``/generative_scoring`` endpoint) reached the OpenAI routes as the request field
``logprob_token_ids`` on ``/v1/chat/completions`` and ``/v1/completions`` (PR #43463, merged 2026-05-23,
closing issue #43466). With a non-empty list, each generated position's ``top_logprobs`` holds the sampled
token plus every listed id, in place of the natural top-k; ``logprobs: true`` is still required, and
``top_logprobs`` no longer has to equal the list's length. The list is capped at 128 ids
(``vllm.sampling_params.MAX_LOGPROB_TOKEN_IDS``; "logprob_token_ids length N exceeds 128"). The values are the
model's raw log-probabilities (``--logprobs-mode raw_logprobs``, the default), before ``logit_bias`` or
temperature, so no bias is sent. ``top_logprobs`` itself stays capped by ``--max-logprobs`` (default 20).
Docs: https://docs.vllm.ai/en/latest/serving/online_serving/generative_scoring/

Where the engine asks for an exact read (:mod:`exact`: the labels' first tokens, from the server's
``/tokenize``), this surface sends those ids as ``logprob_token_ids`` instead of llama.cpp's ``logit_bias`` +
``post_sampling_probs``. A server that refuses the field (a 400 naming it) has it dropped and the question
re-asked on the top-20 window (:mod:`asking`), and ``debug["readout"]["source"]`` says ``"logprobs"``, not
``"logprobs:exact"``. A vLLM older than PR #43463 ignores the unknown field (it logs a warning) and answers
the window; the labels it leaves out are then listed in ``labels_missing``. More than 128 ids: the window.
"""

from __future__ import annotations

from typing import Any

from ..calls import Call
from ..exact import is_exact, window_only
from .chat import CHAT_PATH, chat_call, parse_chat
from .wire import Surface

VLLM = "vllm"
#: The request field that names the token ids to read (vLLM PR #43463).
EXACT_FIELD = "logprob_token_ids"
#: vLLM's ``MAX_LOGPROB_TOKEN_IDS``: more ids than this are a 400, so the window is read instead.
MAX_TOKEN_IDS = 128
#: ``top_logprobs`` beside the ids: vLLM's ``--max-logprobs`` default, the window a refusal falls back to.
WINDOW = 20


def exact_request(fields: dict[str, Any], extra: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The engine's exact fields (llama.cpp's ``logit_bias`` + ``post_sampling_probs``) in vLLM's words:
    the window's fields plus ``logprob_token_ids``; any other request as it is."""
    if not is_exact(fields, extra):
        return fields, extra
    ids = sorted(int(i) for i in fields["logit_bias"])
    plain, plain_extra = window_only(fields, extra, WINDOW)
    if len(ids) <= MAX_TOKEN_IDS:
        plain_extra[EXACT_FIELD] = ids
    return plain, plain_extra


def vllm_call(model: str, messages: list[dict[str, Any]], fields: dict[str, Any], extra: dict[str, Any],
              user_extra: dict[str, Any] | None = None) -> Call:
    """Chat Completions kwargs, the label ids riding in extra_body as ``logprob_token_ids``."""
    sent, sent_extra = exact_request(fields, extra)
    return Call(VLLM, chat_call(model, messages, sent, sent_extra, user_extra).kwargs, CHAT_PATH)


#: Chat Completions' route and reply; vLLM takes an assistant prefill (``continue_final_message``), no GBNF.
VLLM_SURFACE = Surface(VLLM, CHAT_PATH, "/chat/completions", vllm_call, parse_chat, prefill=True, auto=False)

__all__ = ["EXACT_FIELD", "MAX_TOKEN_IDS", "VLLM", "VLLM_SURFACE", "exact_request", "vllm_call"]
