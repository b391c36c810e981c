"""How much of the content-free prior a zero-shot noul divides out, per model.

Chosen leave-one-dataset-out on six public noul sets (``python -m bench heldout_nouls``): the whole prior on the
0.5B, its square root on the 1.5B. The provider is the real openai SDK over ``httpx.MockTransport``, every
state answered with the same window, so the state reads exactly as the empty ones do.
"""

from __future__ import annotations

import math

import httpx
import openai
import pytest

from jev_shared import Noul, SystemOneClient
from jev_shared.models import debias_strength
from tests.helpers.replies import chat_tokens

SMALL, LARGE = "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"
#: The model's lean: "yes" at log P -0.3, "no" at -1.4, whatever the state.
WINDOW = [("yes", -0.3), ("no", -1.4)]
P_YES = math.exp(-0.3) / (math.exp(-0.3) + math.exp(-1.4))


def _reply(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json=chat_tokens(WINDOW, usage=(10, 1)))


def client(model: str) -> SystemOneClient:
    sdk = openai.OpenAI(base_url="http://gpu.internal:8000/v1", api_key="k",
                        http_client=httpx.Client(transport=httpx.MockTransport(_reply)))
    return SystemOneClient(sdk, model=model, api="chat_completions", calibrator=None)


def test_zero_shot_noul_strength_per_model() -> None:
    assert debias_strength(SMALL, "noul", False) == 1.0  # all of it, held out on six noul sets
    assert debias_strength(LARGE, "noul", False) == 0.5  # its square root, chosen the same way
    assert debias_strength("Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF", "noul", False) == 1.0
    assert debias_strength(SMALL, "noul", True) == debias_strength(SMALL, "choice", False) == 1.0
    assert debias_strength("gpt-x", "noul", False) == 0.0


def test_the_small_model_divides_a_noul_by_its_whole_lean() -> None:
    """A state that reads as the empty ones carries nothing: with all of the lean divided out it is a coin."""
    resp = client(SMALL).system_one("ticket", {"spam": Noul(instructions="This is spam.")})
    assert resp.debug["priors"]["spam"]["yes"] == pytest.approx(P_YES)
    assert resp.answers["spam"].noul == pytest.approx(0.5)


def test_the_large_model_divides_a_noul_by_half_its_lean() -> None:
    resp = client(LARGE).system_one("ticket", {"spam": Noul(instructions="This is spam.")})
    assert resp.debug["priors"]["spam"]["yes"] == pytest.approx(math.sqrt(P_YES))
    half = (P_YES / math.sqrt(P_YES), (1 - P_YES) / math.sqrt(1 - P_YES))
    assert resp.answers["spam"].noul == pytest.approx(half[0] / sum(half))
