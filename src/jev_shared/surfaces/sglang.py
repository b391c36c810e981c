"""SGLang's OpenAI-compatible server (``api="sglang"``): Chat Completions, the labels' own tokens read exactly.

What SGLang offers for reading chosen token ids (sgl-project/sglang):

* ``POST /v1/score`` (PR #6460, "Decoder-only Scoring API"; decode removed for it in PR #8840; documented in
  the native API page by PR #16568, usage in the reply by PR #18381): ``{query, items, label_token_ids,
  apply_softmax, item_first}`` → ``{"scores": [[p, ...], ...], "object": "scoring"}``, one list per item in
  ``label_token_ids`` order. It reads ``query + item`` as raw text, without the chat template, and answers
  numbers only (no token text).
* ``POST /generate`` with ``return_logprob``, ``token_ids_logprob`` and ``return_text_in_logprobs`` (native
  API, sampling-parameters page): ``meta_info.output_token_ids_logprobs``; raw text again.
* ``POST /v1/chat/completions`` takes ``logit_bias`` and ``top_logprobs`` above 20, but no token-id list.
  SGLang adds ``logit_bias`` to the next-token logits before its sampler computes the returned log-probabilities,
  so a bias of +:data:`~jev_shared.exact.EXACT_BIAS` on every label token puts them, and only them, at the top,
  and their log-probabilities differ from the model's own by one shared constant (it cancels when the readout
  renormalises over the labels).

This surface keeps the chat template (the prompt the model was tuned on, the one every other surface sends),
so it reads on Chat Completions: ``logit_bias`` on the labels' first tokens (from SGLang's ``/tokenize``) and
``top_logprobs`` sized to them. SGLang's ``top_k`` must be -1 or at least 1, so llama.cpp's ``top_k: 0`` and
``post_sampling_probs`` are not sent. A server that refuses ``logit_bias`` (a 400 naming it) has it dropped and
the question re-asked on the window (:mod:`asking`); ``debug["readout"]["source"]`` then says ``"logprobs"``.
``bench/gpu_check.sh`` checks the read on a real server (a 64-option question, every option's tokens back).
Docs: https://docs.sglang.io/docs/basic_usage/native_api (``/v1/score``, ``/generate``, ``/tokenize``).
"""

from __future__ import annotations

from typing import Any

from ..calls import Call
from ..exact import EXACT_EXTRA, is_exact
from .chat import CHAT_PATH, chat_call, parse_chat
from .wire import Surface

SGLANG = "sglang"
#: The request field that carries the exact read here.
EXACT_FIELD = "logit_bias"
#: Fields of llama.cpp's exact read that SGLang has no use for (``top_k: 0`` is a 400 there).
_LLAMA_ONLY = ("seed",)


def exact_request(fields: dict[str, Any], extra: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The engine's exact fields in SGLang's words: ``logit_bias`` and ``top_logprobs`` kept, greedy, and
    llama.cpp's sampler fields dropped; any other request as it is."""
    if not is_exact(fields, extra):
        return fields, extra
    sent = {k: v for k, v in fields.items() if k not in _LLAMA_ONLY}
    sent["temperature"] = 0
    return sent, {k: v for k, v in extra.items() if k not in EXACT_EXTRA}


def sglang_call(model: str, messages: list[dict[str, Any]], fields: dict[str, Any], extra: dict[str, Any],
                user_extra: dict[str, Any] | None = None) -> Call:
    sent, sent_extra = exact_request(fields, extra)
    return Call(SGLANG, chat_call(model, messages, sent, sent_extra, user_extra).kwargs, CHAT_PATH)


#: Chat Completions' route and reply; SGLang takes an assistant prefill (``continue_final_message``).
SGLANG_SURFACE = Surface(SGLANG, CHAT_PATH, "/chat/completions", sglang_call, parse_chat, prefill=True, auto=False)

__all__ = ["EXACT_FIELD", "SGLANG", "SGLANG_SURFACE", "exact_request", "sglang_call"]
