"""jev_llamaindex: LlamaIndex selectors, a node filter and a reranker that read decisions as probability distributions.

    from jev_llamaindex import JevSingleSelector
    selector = JevSingleSelector.from_defaults(llm=llm)          # was LLMSingleSelector.from_defaults(llm=llm)
    engine = RouterQueryEngine(selector=selector, query_engine_tools=tools)
"""

import importlib.util

if importlib.util.find_spec("llama_index") is None or importlib.util.find_spec("llama_index.core") is None:
    raise ImportError("jev_llamaindex needs llama-index-core: pip install -e '.[llamaindex]' 'openai<3' from a checkout")

from .llm import AsyncLlamaIndexLLMClient, LlamaIndexLLMClient, chat_response_to_dict, system_one_clients
from .postprocessor import JevRelevanceFilter
from .rerank import JevRerank
from .results import JevSelectionEvent, JevSelectorResult, LowConfidenceError
from .selectors import JevMultiSelector, JevSingleSelector

__all__ = [
    "JevSingleSelector",
    "JevMultiSelector",
    "JevSelectorResult",
    "JevSelectionEvent",
    "LowConfidenceError",
    "JevRelevanceFilter",
    "JevRerank",
    "LlamaIndexLLMClient",
    "AsyncLlamaIndexLLMClient",
    "system_one_clients",
    "chat_response_to_dict",
]
