"""Route support tickets to three team chains with JevRouter.

    python examples/langchain_router.py

Runs on the embedded llama.cpp model (no API key needed). With OPENAI_API_KEY set it uses that
server instead (OPENAI_BASE_URL and JEV_MODEL are honoured). One ChatOpenAI model both routes
(its logprobs are read) and writes the replies. The embedded Qwen2.5-Coder-1.5B, the default, routes
these zero-shot: 3 of 3 in our run (billing 0.85, technical 0.96, the discount question sales 0.47
against billing 0.33); the 0.5B (LocalServer(model="qwen2.5-coder-0.5b")) got 2 of 3, the discount
going to technical (0.49 against sales 0.45). Examples (docs/quality.md) or a larger model make surer decisions.
"""

from __future__ import annotations

import os
from contextlib import ExitStack

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_openai import ChatOpenAI

from jev_langchain import JevRouter

TICKETS = [
    "I was charged twice for my subscription this month.",
    "The app crashes as soon as I open the settings page.",
    "Do you offer a discount for teams of more than fifty people?",
]


def chat_model(stack: ExitStack) -> ChatOpenAI:
    if os.environ.get("OPENAI_API_KEY"):
        return ChatOpenAI(model=os.environ.get("JEV_MODEL", "gpt-4o-mini"), logprobs=True, top_logprobs=20)
    from jev_shared.local import LocalServer

    srv = stack.enter_context(LocalServer())
    return ChatOpenAI(base_url=srv.base_url, api_key="local", model=srv.model, logprobs=True, top_logprobs=20)


class ShowDecision(BaseCallbackHandler):
    """Print the router's decision, which it dispatches as the custom event ``jev_route``."""

    def on_custom_event(self, name, data, **kwargs) -> None:
        if name == "jev_route":
            probs = ", ".join(f"{k} {p:.2f}" for k, p in data["probabilities"].items())
            print(f"  -> {data['route']} ({probs}; read with {data['method']})")


def team_chain(team: str, llm: ChatOpenAI):
    prompt = ChatPromptTemplate.from_messages([
        ("system", f"You are the {team} support team. Answer the customer in one short sentence."),
        ("user", "{ticket}"),
    ])
    return prompt | llm.bind(max_tokens=20) | StrOutputParser()


def main() -> None:
    with ExitStack() as stack:
        llm = chat_model(stack)
        router = JevRouter(
            llm,
            {"billing": ("Invoices, refunds, charges and payments", team_chain("billing", llm)),
             "technical": ("Bugs, crashes, errors and outages", team_chain("technical", llm)),
             "sales": ("Prices, plans, discounts and demos", team_chain("sales", llm))},
            "Which team should handle this support ticket?",
            state=lambda x: x["ticket"],
        )
        for ticket in TICKETS:
            print(f"\n{ticket}")
            reply = router.invoke({"ticket": ticket}, {"callbacks": [ShowDecision()]})
            print(f"  {reply.strip()}")


if __name__ == "__main__":
    main()
