"""LlamaIndex door: a RouterQueryEngine over three small indexes, routed by JevSingleSelector.

    python examples/llamaindex_router.py      # needs the llamaindex and local extras

The selector reads a probability for every index instead of parsing a written pick, so each
route comes with its distribution and a confidence. With no OPENAI_API_KEY it runs on the embedded
local model; set OPENAI_API_KEY (and optionally OPENAI_BASE_URL, JEV_MODEL) to use your provider.
The indexes are SummaryIndex, which needs no embeddings, so nothing else is called.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _backend import backend  # noqa: E402
from llama_index.core import Document, SummaryIndex  # noqa: E402
from llama_index.core.query_engine import RouterQueryEngine  # noqa: E402
from llama_index.core.tools import QueryEngineTool  # noqa: E402
from llama_index.llms.openai_like import OpenAILike  # noqa: E402

from jev_llamaindex import JevSingleSelector  # noqa: E402

SHELVES = {
    "billing": ("Refunds, invoices and charges.",
                "Refunds are issued within 5 days to the original card. Invoices are under Settings > Billing."),
    "technical": ("Bugs, crashes, errors and login problems.",
                  "If the app crashes on start, update it and clear its cache. Error 500 means retry in a minute."),
    "office": ("Where our office is, when it is open, how to reach us.",
                "Our office is at 12 Harbour Street, Oslo, open 9:00 to 17:00 on weekdays."),
}
QUESTIONS = ["How long does a refund take?", "The app crashes when I open it.", "Where is your office?"]


def main() -> None:
    with backend() as (client, model, where):
        print(f"Routing {len(QUESTIONS)} questions with {where}\n")
        # The user's own LlamaIndex LLM serves the selector: logprobs on, no max_tokens of its own
        # (the LLM's settings win over the engine's one-token request).
        llm = OpenAILike(model=model, api_base=str(client.base_url), api_key=client.api_key, is_chat_model=True,
                         logprobs=True, top_logprobs=20)
        answer_llm = OpenAILike(model=model, api_base=str(client.base_url), api_key=client.api_key,
                                is_chat_model=True, max_tokens=40)
        tools = [
            QueryEngineTool.from_defaults(
                SummaryIndex.from_documents([Document(text=text)]).as_query_engine(llm=answer_llm),
                name=name, description=description)
            for name, (description, text) in SHELVES.items()
        ]
        # was: LLMSingleSelector.from_defaults(llm=llm). labels="names": the model answers with a
        # tool's name, which small models route by far better than a letter.
        selector = JevSingleSelector.from_defaults(llm=llm, labels="names")
        router = RouterQueryEngine(selector=selector, query_engine_tools=tools, llm=answer_llm)
        for question in QUESTIONS:
            response = router.query(question)
            result = response.metadata["selector_result"]
            dist = "  ".join(f"{k} {p:.2f}" for k, p in result.probabilities.items())
            print(f"Q: {question}\n   route: {result.keys[result.ind]}  ({dist}; confidence {result.confidence:.2f})")
            print(f"   answer: {str(response).strip()[:120]}\n")


if __name__ == "__main__":
    main()
