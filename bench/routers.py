"""The routing benches' parts: the routes and labelled items, the counting meter, and one builder per router.

*Data*: the routes, the labelled items, the worked examples and the ``--set`` swap. ``ROUTES`` and ``RENAME`` are
changed in place by :func:`use_set`, so every module that imported them sees the routes of the set being run.

*The meter*: every HTTP exchange goes through one counting transport. Provider calls and output tokens
(``usage.completion_tokens``) are read off the wire, so they are counted the same way for every contender,
failures included (bench/compare_routers.py, bench/heldout_router.py, bench/rerank.py).

*Contenders*: a builder takes the server's base URL, the model name and the contender's own :class:`Meter`;
``decide(text)`` returns a route name or raises (:class:`Unusable` when the answer is not a route).
*Option sets*: the same items under other names: ``distinct``, the bench's own route names (``billing``, ``hr``,
…); ``collide``, the same routes under names that share a first word, as users write them (``ticket_billing`` /
``ticket_technical``, ``team_hr`` / ``team_it``, …); ``numbered``, LlamaIndex's ``choice_1`` … ``choice_N`` (the
descriptions carry the meaning); ``many``, the bench's routes among distractor routes written for the bench, 40+
options in all (the items' answers are still the bench's routes, so the accuracy is comparable).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


SETS = ("distinct", "collide", "numbered", "many")

COLLIDE = {  # quality.py's four teams and compare_routers' six routes
    "billing": "ticket_billing", "technical": "ticket_technical", "account": "user_account", "shipping": "user_shipping",
    "hr": "team_hr", "it": "team_it", "legal": "team_legal", "finance": "dept_finance", "facilities": "dept_facilities",
    "travel": "dept_travel",
}

DISTRACTORS = {
    "marketing": "campaigns, brand, advertising, social media posts and newsletters",
    "sales_ops": "quotes for prospects, the CRM, sales territories and commission plans",
    "procurement": "choosing suppliers, tenders and framework agreements",
    "security_office": "physical security guards, CCTV footage and lost property",
    "research": "lab equipment, experiments and research grants",
    "training": "courses, workshops, certifications and the learning platform",
    "communications": "internal announcements, the intranet and press releases",
    "investor_relations": "shareholders, annual reports and earnings calls",
    "quality": "quality audits, ISO certification and non-conformity reports",
    "sustainability": "carbon reporting, recycling programmes and energy saving",
    "events": "company parties, offsites, conferences and trade fairs",
    "catering": "the canteen menu, coffee machines and meeting catering",
    "mailroom": "incoming post, couriers and parcel lockers for staff",
    "translation": "translating documents and interpreting for meetings",
    "design": "logos, slide templates, illustrations and the style guide",
    "data_science": "dashboards, forecasting models and data requests",
    "product": "the product roadmap, feature requests and release notes",
    "customer_success": "onboarding large customers and renewals",
    "partnerships": "partner programmes, resellers and co-marketing",
    "tax": "corporate tax returns, VAT filings and transfer pricing",
    "treasury": "bank accounts, cash forecasting and currency hedging",
    "audit": "internal audit reviews and external auditors' requests",
    "risk": "enterprise risk register and business continuity plans",
    "archives": "records retention and retrieving old paper files",
    "library": "books, journal subscriptions and research databases",
    "wellbeing": "mental health support, counselling and the gym membership scheme",
    "diversity": "inclusion networks, diversity reporting and mentoring programmes",
    "works_council": "employee representatives and collective consultation",
    "health_safety": "workplace accidents, first aid and fire drills",
    "fleet": "company cars, fuel cards and car servicing",
    "print_shop": "large print jobs, brochures, posters and binding",
    "reception": "visitor sign-in, guest wifi vouchers and taxis for visitors",
    "pr_agency": "press enquiries handled by the external agency",
    "localisation": "adapting the product and website for new countries",
    "web_team": "the public website, landing pages and the blog",
    "community": "the user forum, volunteering days and charity donations",
}


def criteria_for(routes: Mapping[str, str], which: str) -> tuple[dict[str, str], dict[str, str]]:
    """(the question's criteria, the bench's route name → its name in this set)."""
    if which == "distinct":
        return dict(routes), {k: k for k in routes}
    if which == "collide":
        names = {k: COLLIDE[k] for k in routes}
    elif which == "numbered":
        names = {k: f"choice_{i}" for i, k in enumerate(routes, start=1)}
    elif which == "many":
        extra = {k: v for k, v in DISTRACTORS.items() if k not in routes}
        needed = max(0, 40 - len(routes))
        criteria = dict(routes)
        for i, (k, v) in enumerate(extra.items()):
            if i >= needed:
                break
            criteria[k] = v
        # the bench's routes spread among the distractors, not first in the list
        keys = list(criteria)
        order = keys[len(routes):]
        for i, k in enumerate(routes):
            order.insert(min(len(order), 1 + i * 7), k)
        return {k: criteria[k] for k in order}, {k: k for k in routes}
    else:
        raise ValueError(f"unknown set {which!r}; one of {SETS}")
    return {names[k]: v for k, v in routes.items()}, names


def swap_routing(questions: dict, which: str) -> dict[str, str]:
    """quality.py's routing question under the set's names, in place; returns label → name."""
    from jev_shared import Choice

    routing = questions["routing"]
    criteria, rename = criteria_for(routing.criteria, which)
    questions["routing"] = Choice(instructions=routing.instructions, criteria=criteria)
    return rename


DATA = ROOT / "bench" / "data" / "routing_compare.jsonl"
EXAMPLES = ROOT / "bench" / "data" / "routing_compare_examples.jsonl"
MODELS = {"smollm2": "smollm2-135m", "qwen": "qwen2.5-coder-0.5b", "qwen15": "qwen2.5-coder-1.5b"}
#: Context per server slot: every prompt here fits in a fifth of it.
N_CTX = 2048
#: The output cap given to the contenders that generate text (none sends one by default): a routing
#: answer takes well under 100 tokens, so only a reply that runs on is cut. It shortens their worst
#: latencies (without it a small model can run on to the end of the context), never their accuracy.
GEN_CAP = 256

INSTRUCTIONS = "Which internal team should handle this employee request?"
ROUTES = {
    "hr": "human resources: leave and holidays, sick days, payroll and salary, benefits and pension, hiring, "
          "onboarding, performance reviews, workplace conduct",
    "it": "IT support: laptops and phones, passwords and logins, VPN, email, software and licences, printers, "
          "Wi-Fi, security incidents",
    "legal": "legal: contracts, NDAs, compliance, data privacy and GDPR, trademarks and copyright, disputes",
    "finance": "finance: expense claims and reimbursements, corporate cards, vendor invoices and payments, "
               "purchase orders, budgets",
    "facilities": "facilities: office space, desks, meeting rooms, heating and air conditioning, cleaning, "
                  "repairs, parking, building access badges",
    "travel": "business travel: flights, trains, hotels, rental cars, visas, travel policy and bookings",
}

#: Unscored requests every contender sends first (not in the data set).
WARMUP = ["Who do I talk to about a broken chair in my office?", "Where do I find the holiday calendar for 2027?",
          "My new laptop battery drains in two hours."]

#: The bench's route name → its name in the option set run (``--set``; bench/routers.py).
RENAME: dict[str, str] = {k: k for k in ROUTES}


def use_set(which: str) -> None:
    """Swap the routes for a variant of them (names that collide, 40+ options); items are relabelled."""
    criteria, rename = criteria_for(ROUTES, which)
    ROUTES.clear()
    ROUTES.update(criteria)
    RENAME.clear()
    RENAME.update(rename)


def load_items(limit: int | None) -> list[dict[str, str]]:
    """The first ``limit`` items: the file cycles through the six routes, so a multiple of 6 is balanced."""
    rows = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    rows = [{**r, "label": RENAME.get(r["label"], r["label"])} for r in rows]
    return rows[:limit] if limit else rows


def load_examples() -> list[Any]:
    """One worked example per route, kept apart from the scored items."""
    from jev_shared import Example

    rows = [json.loads(line) for line in EXAMPLES.read_text().splitlines() if line.strip()]
    return [Example(state=r["text"], answer=RENAME.get(r["label"], r["label"])) for r in rows]


class Meter:
    """Provider calls and output tokens, read off the wire (the same for every contender)."""

    def __init__(self) -> None:
        self.calls = 0
        self.output_tokens = 0
        self.paths: dict[str, int] = {}

    def snapshot(self) -> tuple[int, int]:
        return self.calls, self.output_tokens


_COMPLETION = re.compile(rb'"(?:completion_tokens|output_tokens)"\s*:\s*(\d+)')


def buffered(inner: httpx.BaseTransport, request: httpx.Request) -> tuple[bytes, httpx.Response]:
    """Send ``request`` through ``inner`` and read the whole body: (the body, a response that carries it),
    so a meter can read the usage a reply reports and the SDK still gets its response."""
    resp = inner.handle_request(request)
    try:
        body = resp.read()
    finally:
        resp.close()
    headers = [(k, v) for k, v in resp.headers.items() if k.lower() not in ("content-length", "transfer-encoding")]
    return body, httpx.Response(resp.status_code, headers=headers, content=body, request=request,
                                extensions={"http_version": resp.extensions.get("http_version", b"HTTP/1.1")})


class MeteredTransport(httpx.BaseTransport):
    def __init__(self, meter: Meter) -> None:
        self.meter = meter
        self.inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body, resp = buffered(self.inner, request)
        self.meter.calls += 1
        path = request.url.path
        self.meter.paths[path] = self.meter.paths.get(path, 0) + 1
        m = _COMPLETION.search(body)
        if m:
            self.meter.output_tokens += int(m.group(1))
        return resp

    def close(self) -> None:
        self.inner.close()


def http_client(meter: Meter) -> httpx.Client:
    return httpx.Client(transport=MeteredTransport(meter), timeout=httpx.Timeout(300.0))


def openai_client(base_url: str, meter: Meter) -> Any:
    import openai

    return openai.OpenAI(base_url=base_url, api_key="local", http_client=http_client(meter))


class Unusable(Exception):
    """The contender answered, but not with a route (a parse failure, an out-of-range pick, no signal)."""


@dataclass
class Contender:
    name: str
    decide: Callable[[str], str]
    note: str = ""


def bare_call(base_url: str, model: str, meter: Meter) -> Contender:
    """One raw chat.completions.create with the engine's own prompt and a one-token cap."""
    from jev_shared import Choice
    from jev_shared.labels import aliases_for, name_fold
    from jev_shared.prompt import AnswerFormat, render
    from jev_shared.questions import prepare_question

    client = openai_client(base_url, meter)
    prep = prepare_question("route", Choice(instructions=INSTRUCTIONS, criteria=ROUTES), "logprobs")
    aliases = aliases_for(prep.keys, prep.descriptions)  # the engine's default: option names (their aliases where they collide)
    fmt, fold = AnswerFormat(symbols=aliases), name_fold(aliases)
    by_alias = dict(zip(aliases, prep.keys))

    def decide(text: str) -> str:
        r = client.chat.completions.create(model=model, messages=render(prep, text, fmt=fmt), temperature=0,
                                           max_tokens=1, logprobs=True, top_logprobs=20)
        token = r.choices[0].message.content or ""
        route = by_alias.get(fold(token) or "")
        if route not in ROUTES:
            raise Unusable(f"sampled {token!r}")
        return route

    return Contender("bare one-token call", decide, "the sampled token alone; the latency floor")


def jev_router(base_url: str, model: str, meter: Meter, *, labels: str, mode: str, shots: bool = False,
               debias: bool | str = False, method: str = "logprobs") -> Contender:
    from langchain_core.runnables import RunnableLambda

    from jev_langchain import JevRouter
    from jev_shared import SystemOneClient
    from jev_shared.backend import describe

    class Recording(SystemOneClient):
        """Keeps the last response, to see its debug (no_signal, passes) without changing anything."""

        last: Any = None

        def system_one(self, *args: Any, **kwargs: Any) -> Any:
            self.last = super().system_one(*args, **kwargs)
            return self.last

    raw = openai_client(base_url, meter)
    if debias == "auto":  # the engine's default on a LocalServer client: marked as LocalServer.client() marks it
        describe(raw, surfaces=("chat_completions",), debias=model == MODELS["qwen"])
    client = Recording(raw, model=model, method=method, mode=mode, labels=labels, debias=debias)
    router = JevRouter(client, {name: (desc, RunnableLambda(lambda _x, n=name: n)) for name, desc in ROUTES.items()},
                       INSTRUCTIONS, examples=load_examples() if shots else None)

    def decide(text: str) -> str:
        route = router.invoke(text)
        dbg = client.last.debug or {}
        if dbg.get("no_signal"):
            raise Unusable("no label in the logprob window")
        return route

    label = (f"Jev router, {labels}" + {True: ", debias", False: "", "auto": " (default)"}[debias]
             + (", mode=auto" if mode == "auto" else "") + (", 6 examples" if shots else "")
             + (f", method={method}" if method != "logprobs" else ""))
    return Contender(label, decide, f"JevRouter, method=logprobs, labels={labels}, debias={debias}, mode={mode}, "
                                    f"examples={len(load_examples()) if shots else 0}")


def langchain_structured(base_url: str, model: str, meter: Meter) -> Contender:
    """LangChain's routing guide: structured output over a Literal of the route names, then a branch."""
    from operator import itemgetter
    from typing import Literal

    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnableLambda
    from langchain_openai import ChatOpenAI
    from typing_extensions import TypedDict

    names = tuple(ROUTES)

    # the guide's ``class RouteQuery(TypedDict): destination: Literal[...]``, built from the route names
    RouteQuery = TypedDict("RouteQuery", {"destination": Literal[names]})  # type: ignore[misc,valid-type]  # noqa: UP013
    RouteQuery.__doc__ = "Route the request to the team that should handle it."

    llm = ChatOpenAI(model=model, base_url=base_url, api_key="local", temperature=0, max_tokens=GEN_CAP,
                     http_client=http_client(meter))
    system = (INSTRUCTIONS + " Route the user's request to one of these teams:\n"
              + "\n".join(f"- {n}: {d}" for n, d in ROUTES.items()))
    route_prompt = ChatPromptTemplate.from_messages([("system", system.replace("{", "{{").replace("}", "}}")),
                                                     ("human", "{input}")])
    route_chain = route_prompt | llm.with_structured_output(RouteQuery) | itemgetter("destination")
    branches = {n: RunnableLambda(lambda _x, n=n: n) for n in names}
    chain = {"destination": route_chain, "input": lambda x: x["input"]} | RunnableLambda(
        lambda x: branches[x["destination"]])

    def decide(text: str) -> str:
        route = chain.invoke({"input": text})
        if route not in ROUTES:
            raise Unusable(f"destination {route!r}")
        return route

    return Contender("LangChain structured router", decide, "with_structured_output(Literal) | branch")


def llamaindex_selector(base_url: str, model: str, meter: Meter) -> Contender:
    from llama_index.core.selectors import LLMSingleSelector
    from llama_index.core.tools import ToolMetadata
    from llama_index.llms.openai_like import OpenAILike

    llm = OpenAILike(model=model, api_base=base_url, api_key="local", is_chat_model=True, temperature=0.0,
                     max_tokens=GEN_CAP, http_client=http_client(meter), timeout=300.0)
    selector = LLMSingleSelector.from_defaults(llm=llm)
    tools = [ToolMetadata(name=n, description=f"{n}: {d}") for n, d in ROUTES.items()]
    names = list(ROUTES)

    def decide(text: str) -> str:
        result = selector.select(tools, text)
        index = result.selections[0].index if result.selections else -1
        if not 0 <= index < len(names):
            raise Unusable(f"index {index}")
        return names[index]

    return Contender("LlamaIndex LLMSingleSelector", decide, "OpenAILike(is_chat_model=True), select(tools, query)")


def jevper_engine(base_url: str, model: str, meter: Meter) -> Contender:
    import jevper

    client = jevper.SystemOneClient(openai_client(base_url, meter), model=model, method="logprobs", temperature=0,
                                    extra_body={"max_tokens": GEN_CAP})
    question = jevper.Choice(instructions=INSTRUCTIONS, criteria=ROUTES)

    def decide(text: str) -> str:
        return client.system_one(state=text, questions={"route": question}).answers["route"].choice

    return Contender("jevper (peer engine)", decide, f"jevper {jevper.__version__}, method=logprobs, temperature=0")


BUILDERS: dict[str, Callable[..., Contender]] = {
    "bare": bare_call,
    "jev-letters": lambda b, m, meter: jev_router(b, m, meter, labels="letters", mode="system1"),
    "jev-names": lambda b, m, meter: jev_router(b, m, meter, labels="names", mode="system1"),
    "jev-debias": lambda b, m, meter: jev_router(b, m, meter, labels="names", mode="system1", debias=True),
    # the engine's defaults on a LocalServer client (debias="auto": on for zero-shot on the embedded model)
    "jev-default": lambda b, m, meter: jev_router(b, m, meter, labels="names", mode="system1", debias="auto"),
    "jev-default-shots": lambda b, m, meter: jev_router(b, m, meter, labels="names", mode="system1", debias="auto",
                                                        shots=True),
    "jev-structured": lambda b, m, meter: jev_router(b, m, meter, labels="names", mode="system1", method="structured"),
    "jev-auto": lambda b, m, meter: jev_router(b, m, meter, labels="names", mode="auto"),
    # not in the default set: the others get no examples, so these rows are not like for like
    "jev-letters-shots": lambda b, m, meter: jev_router(b, m, meter, labels="letters", mode="system1", shots=True),
    "jev-names-shots": lambda b, m, meter: jev_router(b, m, meter, labels="names", mode="system1", shots=True),
    "langchain": langchain_structured,
    "llamaindex": llamaindex_selector,
    "jevper": jevper_engine,
}


DEFAULT = ["bare", "jev-default", "jev-names", "jev-debias", "jev-letters", "jev-auto", "langchain", "llamaindex", "jevper"]
