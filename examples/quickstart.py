"""The main job: decide a handful of support tickets — which team, how urgent, is it spam.

    bash scripts/demo.sh            # or: python examples/quickstart.py

With no OPENAI_API_KEY it runs on the embedded local model (Qwen2.5-Coder-1.5B, the default;
JEV_MODEL=qwen2.5-coder-0.5b for the smaller, faster one) with the settings the docs recommend: an
example for every option of every question (docs/quality.md), and the model's own debias
(``debias="auto"``) and calibration where they are shipped for it. Set OPENAI_API_KEY (and
optionally OPENAI_BASE_URL, JEV_MODEL) to use your provider instead.

It prints a line at every step: starting the model, getting each question ready (``client.prepare``:
the model answers the question's own worked examples once, so its habits can be measured and divided
out; they are kept in ~/.cache/jev, so a second run asks nothing again), and each ticket, every answer
with how sure the engine is and whether that is sure enough to act on.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

STARTED = time.monotonic()


def say(line: str = "") -> None:
    print(line, flush=True)


say("jev demo: 5 support tickets, three questions each (which team, how urgent, is it spam)")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _backend import backend  # noqa: E402

from jev_shared import Choice, Example, Noul, Score, SystemOneClient  # noqa: E402

TICKETS = [
    "I was charged twice for my subscription this month. Please refund the extra payment.",
    "The mobile app crashes every time I open the settings screen since the last update.",
    "We are a team of 40 and would like a quote for the enterprise plan with SSO.",
    "CONGRATULATIONS!!! You have been selected to receive a FREE cruise. Click here now.",
    "Our whole company is locked out: every login returns error 500. We cannot work.",
]

# One worked example for every option of every question: the setting docs/quality.md measured best
# on both embedded models (routing on the 0.5B 86% with four examples against 61% zero-shot; on the
# 1.5B's quick bench 100% against 80%).
QUESTIONS = {
    "team": Choice(
        instructions="Which team should handle this support ticket?",
        criteria={
            "billing": "payments, invoices, refunds, charges",
            "technical": "bugs, crashes, errors, outages, login problems",
            "sales": "quotes, pricing, new plans, upgrades",
        },
        examples=[
            Example(state="My invoice shows the wrong amount.", answer="billing"),
            Example(state="The export button throws an error.", answer="technical"),
            Example(state="How much is the premium plan for 10 users?", answer="sales"),
        ],
    ),
    "urgency": Score(
        instructions="How urgent is this ticket?",
        criteria=["can wait", "within a few days", "today", "right now: people cannot work"],
        examples=[Example(state="Could you add a dark mode some day?", answer=0),
                  Example(state="Please send me last year's invoices when you can.", answer=1),
                  Example(state="My card was declined and my plan ends tonight.", answer=2),
                  Example(state="Nobody in our office can open the app; all work has stopped.", answer=3)],
    ),
    "spam": Noul(
        instructions="This message is spam or a scam, not a real customer request.",
        examples=[Example(state="You won a FREE prize, click this link!", answer=True),
                  Example(state="Please update the billing address on my account.", answer=False),
                  Example(state="Cheap luxury watches, 90% off today only!!! Visit our site.", answer=True),
                  Example(state="We would like a demo of your product for our team.", answer=False)],
    ),
}


@contextmanager
def ticking(what: str, every: float = 5.0) -> Iterator[None]:
    """Print a line every few seconds while a step runs, so the screen never goes quiet."""
    done = threading.Event()
    start = time.monotonic()

    def tick() -> None:
        while not done.wait(every):
            say(f"  ... {what}, {time.monotonic() - start:.0f} s")

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def sure(p: float, gate: float | None) -> str:
    """How sure, in words: at or above the gate the model's calibration recommends (docs/quality.md)."""
    if gate is None:
        return "no tested gate on this model"
    return f"sure (p >= {gate:.2f})" if p >= gate else f"unsure (p < {gate:.2f}): check it"


def main() -> None:
    with backend() as (client, model, where):
        say(f"getting each question ready on {where}: the model answers the question's worked examples once,"
            " so its habits can be measured and divided out (kept for the next run) ...")
        engine = SystemOneClient(client, model=model)
        cal = engine.calibrator

        def gate(qid: str, kind: str) -> float | None:
            return cal.threshold(cal.key_for(qid, kind, examples=True)) if cal is not None else None

        for qid, question in QUESTIONS.items():
            with ticking(f"getting {qid!r} ready"):
                prep = engine.prepare({qid: question})
            how = ("kept from an earlier run" if prep.prior_calls == 0
                   else f"{prep.prior_calls} of them on its examples")
            say(f"  {qid:<8} ready: {prep.calls} model calls ({how}), {prep.seconds:.1f} s")
        say()
        for n, ticket in enumerate(TICKETS, 1):
            say(f"ticket {n}/{len(TICKETS)}: {ticket}")
            with ticking("deciding"):
                resp = engine.system_one(ticket, QUESTIONS)
            team, urgency, spam = resp.answers["team"], resp.answers["urgency"], resp.answers["spam"]
            p_team = team.probabilities[team.choice]
            others = ", ".join(f"{k} {p:.2f}" for k, p in team.probabilities.items() if k != team.choice)
            say(f"  team     {team.choice:<10} p {p_team:.2f} ({others}) - {sure(p_team, gate('team', 'choice'))}")
            level = max(urgency.probabilities, key=urgency.probabilities.get)
            p_level = urgency.probabilities[level]
            say(f"  urgency  {urgency.legend[level]!r:<32} p {p_level:.2f} (expected level {urgency.score:.1f} of 3)"
                f" - {sure(p_level, gate('urgency', 'score'))}")
            p_spam = max(spam.noul, 1 - spam.noul)
            say(f"  spam     {'yes' if spam.noul >= 0.5 else 'no':<10} P(spam) {spam.noul:.2f}"
                f" - {sure(p_spam, gate('spam', 'noul'))}")
            say(f"  cost     {resp.usage.n_calls} calls, {resp.usage.output_tokens} output tokens, "
                f"{resp.usage.latency_ms / 1000:.1f} s\n")
        say(f"done in {time.monotonic() - STARTED:.0f} s. p: how likely the answer is right, as the engine states it"
            " (calibrated where the model ships a calibration);\nsure: p reaches the level at which this model's answers"
            " were right 95% of the time on held-out data (docs/quality.md); unsure: below it, so check the answer"
            " or let a person decide.")


if __name__ == "__main__":
    main()
