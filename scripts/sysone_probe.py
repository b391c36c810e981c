"""Ask a System One service a choice, a score and a noul through each PyPI System One client.

Runs in the clients' own environment (``.venv-sysone``, made by ``scripts/sysone_env.sh``), not the
project's: the three SDKs bring their own HTTP stacks. Prints one JSON object, client name ->
``{"answers": ..., "error": ...}`` (and ``"models"`` for typesafe-sdk's ``models.list()``), which
tests/gateway/test_sysone_clients.py checks. By hand:

    .venv-sysone/bin/python scripts/sysone_probe.py --url http://127.0.0.1:8000 --key KEY --model MODEL
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import traceback
from collections.abc import Callable
from typing import Any

#: The stub backend of tests/gateway answers from the state: ``want=`` picks the option, ``truth=`` the noul.
STATE = "want=billing truth=yes I was charged twice for my plan, please refund one of them."
TEAM = {"billing": "Invoices, refunds and payments", "technical": "Bugs, errors and outages"}
LEVELS = ["can wait", "today", "right now"]
SPAM = "The message is a genuine customer request."


def _answers(choice: Any, score: Any, noul: Any) -> dict[str, Any]:
    """The three answers in the System One shape, read through each SDK's own typed attributes."""
    return {"team": {"choice": choice.choice, "probabilities": dict(choice.probabilities),
                     "confidence": choice.confidence},
            "urgency": {"score": score.score, "probabilities": {str(k): v for k, v in score.probabilities.items()},
                        "confidence": score.confidence},
            "genuine": {"noul": noul.noul, "confidence": getattr(noul, "confidence", "absent")}}


def typesafe_sdk(url: str, key: str, model: str) -> dict[str, Any]:
    from typesafe_sdk import Choice, Noul, RetryPolicy, Score, TypeSafeClient

    out: dict[str, Any] = {}
    with TypeSafeClient(api_key=key, base_url=url, model=model, retry=RetryPolicy(max_retries=0)) as client:
        resp = client.system_one(state=STATE, questions={
            "team": Choice(instructions="Which team should handle this ticket?", criteria=TEAM),
            "urgency": Score(instructions="How urgent is it?", criteria=LEVELS),
            "genuine": Noul(instructions=SPAM)})
        out["answers"] = _answers(resp.choices["team"], resp.scores["urgency"], resp.nouls["genuine"])
        try:
            out["models"] = [m.name for m in client.models.list().models]
        except Exception as exc:  # noqa: BLE001 - reported, and checked by the test
            out["models_error"] = f"{type(exc).__name__}: {exc}"[:400]
    return out


def typesafe_sdk_zstd(url: str, key: str, model: str) -> dict[str, Any]:
    """typesafe-sdk sends a body of 1 KiB or more zstd-compressed (``Content-Encoding: zstd``) where zstd
    is available: Python 3.14, or the ``typesafe-sdk[zstd]`` extra, which scripts/sysone_env.sh installs."""
    from typesafe_sdk import Noul, RetryPolicy, TypeSafeClient

    long_state = STATE + " " + "The invoice number is INV-2041, paid by card on the first of the month. " * 20
    with TypeSafeClient(api_key=key, base_url=url, model=model, retry=RetryPolicy(max_retries=0),
                        compression="zstd") as client:
        resp = client.system_one(state=long_state, questions={"genuine": Noul(instructions=SPAM)})
    return {"answers": {"genuine": {"noul": resp.nouls["genuine"].noul}}, "body_bytes": len(long_state)}


def system_one(url: str, key: str, model: str) -> dict[str, Any]:
    from system_one import HTTPConfig, SystemOne

    agent = SystemOne(HTTPConfig(base_url=url, api_key=key, model=model, max_retries=0, timeout=30))
    resp = agent.ask(STATE, {
        "team": {"type": "choice", "instructions": "Which team should handle this ticket?", "criteria": TEAM},
        "urgency": {"type": "score", "instructions": "How urgent is it?", "criteria": LEVELS},
        "genuine": {"type": "noul", "instructions": SPAM}})
    return {"answers": _answers(resp.choices["team"], resp.scores["urgency"], resp.nouls["genuine"])}


def sq_system_one(url: str, key: str, model: str) -> dict[str, Any]:
    from systemone_sq import Choice, Client, Noul, Score

    with Client(provider="jev", base_url=url, model=model, api_key=key, retries=0, timeout=30) as client:
        result = client.evaluate(STATE, {"team": Choice("Which team should handle this ticket?", TEAM),
                                         "urgency": Score("How urgent is it?", LEVELS),
                                         "genuine": Noul(SPAM)})
    a = result.answers
    return {"answers": _answers(a["team"], a["urgency"], a["genuine"])}


CLIENTS: dict[str, Callable[[str, str, str], dict[str, Any]]] = {
    "typesafe-sdk": typesafe_sdk, "typesafe-sdk (zstd body)": typesafe_sdk_zstd, "system-one": system_one,
    "sq-system-one": sq_system_one}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the service's origin, e.g. http://127.0.0.1:8000")
    parser.add_argument("--key", required=True)
    parser.add_argument("--model", required=True)
    args = parser.parse_args()
    # No user config or key from this machine may steer a client: each is pointed here explicitly.
    os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="sysone-probe-")
    for name in ("TYPESAFE_API_KEY", "TYPESAFE_BASE_URL", "SYSTEM_ONE_API_KEY", "SYSTEM_ONE_BASE_URL", "SQ_CONFIG",
                 "SQ_BASE_URL", "SQ_PROVIDER", "SQ_MODEL"):
        os.environ.pop(name, None)
    report: dict[str, Any] = {}
    for name, probe in CLIENTS.items():
        try:
            report[name] = probe(args.url, args.key, args.model)
        except Exception as exc:  # noqa: BLE001 - one client's failure is a result
            report[name] = {"error": f"{type(exc).__name__}: {exc}"[:400], "trace": traceback.format_exc()[-1500:]}
    print(json.dumps(report, default=str))


if __name__ == "__main__":
    main()
