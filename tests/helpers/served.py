"""Stubs of vLLM's and SGLang's documented wire, on a loopback socket (no GPU server can run here).

A fake model with a fixed next-token distribution over a small vocabulary answers, as each server documents:

* ``POST /tokenize`` (both): ``{"prompt", "add_special_tokens"}`` → ``{"tokens", "count", "max_model_len"}``;
* vLLM ``POST /v1/chat/completions``: ``logprobs``/``top_logprobs`` (at most ``--max-logprobs`` 20, else a
  400), and ``logprob_token_ids`` (PR #43463): the sampled token plus every listed id, raw log-probabilities,
  at most 128 ids; ``logit_bias`` moves the sampled token only (raw logprobs are read before it);
* SGLang ``POST /v1/chat/completions``: the window of the log-probabilities after ``logit_bias`` (added to
  the logits before the sampler), ``top_logprobs`` above 20 accepted, ``top_k: 0`` a 400;
* SGLang ``POST /v1/score`` (PR #6460): ``label_token_ids`` probabilities after ``query + item``,
  softmaxed over the labels with ``apply_softmax``.

``refuse`` names a field the stub answers with a 400 naming it (a server that does not take it); ``ignore``
one it drops unread (a vLLM before PR #43463 logs such a field and goes on). Every request body is kept on
``seen``.
"""

from __future__ import annotations

import math
from typing import Any

import openai

from jev_shared import SystemOneClient

from .server import Loopback
from .wire import Request, json_reply

#: What a reply that is no answer starts with.
JUNK = ("I", "The", "In", "Sure")
#: vLLM's ``--max-logprobs`` default and ``MAX_LOGPROB_TOKEN_IDS``.
MAX_LOGPROBS, MAX_TOKEN_IDS = 20, 128


class FakeModel:
    """Each word and its space-led twin one token; ``favourite`` first, the others falling off one by one,
    the junk starts in between (so a top-20 window leaves most of 64 options out)."""

    def __init__(self, words: list[str], favourite: str) -> None:
        pieces = list(dict.fromkeys([*words, *(" " + w for w in words), *JUNK]))
        self.vocab = {t: i + 1000 for i, t in enumerate(pieces)}
        self.tokens = {i: t for t, i in self.vocab.items()}
        scores = {t: -1.0 for t in JUNK}
        for i, w in enumerate(words):
            scores[w] = 0.0 if w == favourite else -2.0 - 0.1 * i
            scores[" " + w] = scores[w] - 5.0
        z = math.log(sum(math.exp(s) for s in scores.values()))
        self.lps = {self.vocab[t]: s - z for t, s in scores.items()}

    def tokenize(self, text: str) -> list[int]:
        """A known piece is one token; anything else one token per character (ids 5000 + code point)."""
        return [self.vocab[text]] if text in self.vocab else [5000 + ord(c) for c in text]

    def label_probs(self, words: list[str]) -> dict[str, float]:
        """The model's own distribution over ``words`` (their own-form tokens), renormalised."""
        z = sum(math.exp(self.lps[self.vocab[w]]) for w in words)
        return {w: math.exp(self.lps[self.vocab[w]]) / z for w in words}

    def entry(self, ranked: list[tuple[int, float]], sampled: tuple[int, float]) -> dict[str, Any]:
        alts = [{"token": self.tokens[i], "logprob": lp, "bytes": list(self.tokens[i].encode())} for i, lp in ranked]
        return {"token": self.tokens[sampled[0]], "logprob": sampled[1], "bytes": list(self.tokens[sampled[0]].encode()),
                "top_logprobs": alts}


def _chat(body: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    return {"id": "chatcmpl-stub", "object": "chat.completion", "created": 0, "model": body.get("model"),
            "choices": [{"index": 0, "finish_reason": "length", "logprobs": {"content": [entry]},
                         "message": {"role": "assistant", "content": entry["token"]}}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 1, "total_tokens": 41}}


def _error(message: str, param: str | None, nested: bool) -> Any:
    err = {"message": message, "type": "BadRequestError", "param": param, "code": 400}
    return json_reply({"error": err} if nested else {"object": "error", **err}, 400)


class ServedStub(Loopback):
    """``with ServedStub("vllm", model) as srv: openai.OpenAI(base_url=srv.base_url, api_key="-")``."""

    def __init__(self, engine: str, model: FakeModel, *, refuse: str | None = None, ignore: str | None = None) -> None:
        super().__init__(self.respond)
        self.engine, self.model, self.refuse, self.ignore = engine, model, refuse, ignore
        self.seen: list[dict[str, Any]] = []

    def respond(self, req: Request) -> Any:
        body = req.body if isinstance(req.body, dict) else {}
        if req.path == "/tokenize":
            tokens = self.model.tokenize(body["prompt"])
            return {"tokens": tokens, "count": len(tokens), "max_model_len": 32768}
        self.seen.append(body)
        if self.refuse and self.refuse in body:
            return _error(f"{self.refuse} is not supported by this server", self.refuse, self.engine == "vllm")
        body = {k: v for k, v in body.items() if k != self.ignore}
        if req.path == "/v1/score" and self.engine == "sglang":
            return self.score(body)
        if req.path != "/v1/chat/completions":
            return json_reply({"detail": "Not Found"}, 404)
        return self.vllm(body) if self.engine == "vllm" else self.sglang(body)

    def vllm(self, body: dict[str, Any]) -> Any:
        lps = self.model.lps
        k = body.get("top_logprobs") or 0
        if k > MAX_LOGPROBS:
            return _error(f"top_logprobs ({k}) exceeds max_logprobs ({MAX_LOGPROBS})", "top_logprobs", True)
        biased = {i: lp + float((body.get("logit_bias") or {}).get(str(i), 0)) for i, lp in lps.items()}
        top = max(biased, key=lambda i: biased[i])
        sampled = (top, lps[top])  # raw logprobs: the bias moved the choice, not the numbers
        ids = body.get("logprob_token_ids")
        if ids:
            if len(ids) > MAX_TOKEN_IDS:
                return _error(f"logprob_token_ids length {len(ids)} exceeds {MAX_TOKEN_IDS}.", None, True)
            ranked = [(i, lps.get(i, -30.0)) for i in dict.fromkeys([top, *ids])]
        else:
            ranked = sorted(lps.items(), key=lambda t: -t[1])[:k]
        return _chat(body, self.model.entry(ranked, sampled))

    def sglang(self, body: dict[str, Any]) -> Any:
        if body.get("top_k") == 0:
            return _error("top_k must be -1 (disable), or at least 1, got 0.", None, False)
        bias = body.get("logit_bias") or {}
        logits = {i: lp + float(bias.get(str(i), 0)) for i, lp in self.model.lps.items()}
        z = math.log(sum(math.exp(v) for v in logits.values()))
        post = {i: v - z for i, v in logits.items()}  # the logprobs SGLang returns: after the bias
        ranked = sorted(post.items(), key=lambda t: -t[1])[:body.get("top_logprobs") or 0]
        top = max(post, key=lambda i: post[i])
        return _chat(body, self.model.entry(ranked, (top, post[top])))

    def score(self, body: dict[str, Any]) -> Any:
        ids = body.get("label_token_ids")
        if not ids:
            return _error("label_token_ids is required for generation (CausalLM) models.", None, False)
        items = body.get("items")
        items = [items] if isinstance(items, str) else items or []
        probs = [math.exp(self.model.lps.get(i, -30.0)) for i in ids]
        if body.get("apply_softmax"):
            probs = [p / sum(probs) for p in probs]
        return {"scores": [probs for _ in items], "model": body.get("model", "default"), "object": "scoring",
                "usage": {"prompt_tokens": 40 * len(items), "total_tokens": 40 * len(items), "completion_tokens": 0}}


#: Sixty-four option names, more than any top-20 window holds.
WORDS = [f"opt{i:02d}" for i in range(64)]


def served_client(srv: ServedStub, api: str, *, exact: bool = True) -> SystemOneClient:
    """A client of the stub on ``api`` ("vllm" or "sglang": the engine asks the server's /tokenize itself);
    exact=False: the same server on api="chat_completions", which reads the window."""
    sdk = openai.OpenAI(base_url=srv.base_url, api_key="k", max_retries=0)
    return SystemOneClient(sdk, model="qwen", api=api if exact else "chat_completions", calibrator=None,
                           debias=False, debug=True)
