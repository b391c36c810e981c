"""The recorded scenarios: what scripts/record_cassettes.py records and the cassette tests replay.

Both sides build the very same requests from here, so a replay proves the engine still sends
what the server answered (cassettes match on the request body).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jev_shared import Choice, Noul, Score, SystemOneClient

TICKET = "My invoice was charged twice this month, please refund the duplicate payment."
TEAM = Choice(
    instructions="Which team should handle this support ticket?",
    criteria={"billing": "Invoices, refunds and payments", "technical": "Bugs, errors and outages",
              "sales": "Buying, pricing and upgrades"},
)
URGENCY = Score(instructions="How urgent is this ticket?", criteria=["can wait", "this week", "today", "right now"])
SPAM = Noul(instructions="This ticket is spam.")
CHATTY = Choice(instructions="Say hello first, then pick the team.",
                criteria={"billing": "Invoices", "technical": "Bugs", "sales": "Pricing"})
MANY = Choice(instructions="Which topic is this ticket about?",
              criteria={f"topic_{i:02d}": f"Topic number {i}" for i in range(26)})
#: Names that share a first word: answered by what differs (status, cancel, refund).
ORDERS = Choice(instructions="What does the customer want?",
                criteria={"order_status": "to know where the order is", "order_cancel": "to cancel the order",
                          "order_refund": "money back for the order"})
#: Numbered names without descriptions: aliases 10..15 share the token "1", read on by a continuation call.
NUMBERED = Choice(instructions="Which queue (10 billing, 11 bugs, 12 sales, 13 shipping, 14 accounts, 15 other)?",
                  criteria={f"queue_{i}": "" for i in range(10, 16)})
#: 40 options by name: one token, no JSON method.
FORTY = Choice(instructions="Which department should handle this ticket?",
               criteria={w: "" for w in (
                   "billing technical sales shipping account legal finance marketing research training design "
                   "product security quality events catering travel facilities payroll tax treasury audit risk "
                   "archives library wellbeing fleet reception localisation community partnerships procurement "
                   "translation communications investors sustainability mailroom printing analytics support").split()})


def scenarios(client: Any, model: str) -> dict[str, Callable[[], Any]]:
    def engine(**kw: Any) -> SystemOneClient:
        kw.setdefault("extra_body", {"cache_prompt": False})
        kw.setdefault("api", "chat_completions")
        kw.setdefault("labels", "letters")  # the letter readout on the wire; logprobs_names covers names
        return SystemOneClient(client, model=model, max_concurrency=1, **kw)

    return {
        "logprobs_choice": lambda: engine(method="logprobs").system_one(TICKET, {"team": TEAM}),
        "logprobs_score": lambda: engine(method="logprobs").system_one(TICKET, {"urgency": URGENCY}),
        "logprobs_noul": lambda: engine(method="logprobs").system_one(TICKET, {"spam": SPAM}),
        "logprobs_three": lambda: engine(method="logprobs").system_one(
            TICKET, {"team": TEAM, "urgency": URGENCY, "spam": SPAM}),
        "logprobs_names": lambda: engine(method="logprobs", labels="names").system_one(
            TICKET, {"team": TEAM, "urgency": URGENCY, "spam": SPAM}),
        "names_collide": lambda: engine(method="logprobs", labels="names").system_one(TICKET, {"want": ORDERS}),
        "names_continuation": lambda: engine(method="logprobs", labels="names").system_one(TICKET, {"tool": NUMBERED}),
        "names_forty": lambda: engine(method="logprobs", labels="names").system_one(TICKET, {"dept": FORTY}),
        "logprobs_debias": lambda: engine(method="logprobs", labels="names", debias=True).system_one(
            TICKET, {"team": TEAM, "spam": SPAM}),
        "grammar_choice": lambda: engine(method="grammar").system_one(TICKET, {"team": TEAM}),
        "window_misses_label": lambda: engine(method="logprobs", top_logprobs=3).system_one(TICKET, {"topic": MANY}),
        "truncated_generation": lambda: engine(
            method="structured", extra_body={"cache_prompt": False, "max_tokens": 4}).system_one(TICKET, {"team": TEAM}),
        "structured_choice": lambda: engine(method="structured").system_one(TICKET, {"team": TEAM}),
        # SmolLM2 answers {"noul": 2}: llama.cpp's grammar does not hold a number to the schema's bounds
        "structured_out_of_range": lambda: engine(method="structured").system_one(TICKET, {"spam": SPAM}),
        "discrete_choice": lambda: engine(method="discrete").system_one(TICKET, {"team": TEAM, "urgency": URGENCY}),
        "system2_ratings": lambda: engine(mode="system2").system_one(TICKET, {"team": TEAM, "spam": SPAM}),
        "mode_auto": lambda: engine(method="logprobs", mode="auto").system_one(TICKET, {"team": TEAM, "spam": SPAM}),
        "non_label_retry": lambda: engine(method="logprobs", labels="names", top_logprobs=2, strict_labels=True).system_one(
            "hello there", {"team": CHATTY}),
        "responses_auto_moves_to_chat": lambda: [
            engine(api="auto", method="logprobs").system_one(TICKET, {"team": TEAM}) for _ in range(1)],
        "responses_structured": lambda: engine(api="responses", method="structured").system_one(
            TICKET, {"team": TEAM, "spam": SPAM}),
        "responses_logprobs_explicit": lambda: engine(api="responses", method="logprobs").system_one(
            TICKET, {"team": TEAM}),
        "openai_responses_empty_logprobs": lambda: client.responses.create(
            model=model, input="Answer with one letter: A or B?", max_output_tokens=1,
            include=["message.output_text.logprobs"], extra_body={"cache_prompt": False}),
    }


