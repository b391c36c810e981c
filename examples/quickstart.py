"""The main job: decide a handful of support tickets — which team, how urgent, is it spam.

    bash scripts/demo.sh            # or: python examples/quickstart.py

With no OPENAI_API_KEY it runs on the embedded local model; set OPENAI_API_KEY (and optionally
OPENAI_BASE_URL, JEV_MODEL) to use your provider instead.
"""

from __future__ import annotations

import sys
from pathlib import Path

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
                  Example(state="Nobody in our office can open the app; all work has stopped.", answer=3)],
    ),
    "spam": Noul(
        instructions="This message is spam or a scam, not a real customer request.",
        examples=[Example(state="You won a FREE prize, click this link!", answer=True),
                  Example(state="Please update the billing address on my account.", answer=False),
                  Example(state="Cheap luxury watches, 90% off today only!!! Visit our site.", answer=True),
                  Example(state="The app logs me out every few minutes.", answer=False)],
    ),
}


def bar(p: float, width: int = 20) -> str:
    return "#" * round(p * width) + "." * (width - round(p * width))


def main() -> None:
    with backend() as (client, model, where):
        print(f"Deciding {len(TICKETS)} tickets with {where}\n")
        engine = SystemOneClient(client, model=model, labels="names")
        for ticket in TICKETS:
            resp = engine.system_one(ticket, QUESTIONS)
            team, urgency, spam = resp.answers["team"], resp.answers["urgency"], resp.answers["spam"]
            print(f"> {ticket}")
            print(f"  team     {team.choice:<10} confidence {team.confidence:.2f}")
            for key, p in team.probabilities.items():
                print(f"           {key:<10} {bar(p)} {p:.2f}")
            print(f"  urgency  {urgency.score:.2f} of 3 ({urgency.legend[str(round(urgency.score))]}), "
                  f"confidence {urgency.confidence:.2f}")
            print(f"  spam     P(true) = {spam.noul:.2f}")
            print(f"  cost     {resp.usage.n_calls} calls, {resp.usage.output_tokens} output tokens, "
                  f"{resp.usage.latency_ms:.0f} ms ({', '.join(sorted(set(resp.debug['methods'].values())))})\n")


if __name__ == "__main__":
    main()
