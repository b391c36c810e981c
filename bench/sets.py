"""Option-set variants for the routing benches: the same items, with names that collide, or 40+ options.

* ``distinct``: the bench's own route names (``billing``, ``hr``, …).
* ``collide``: the same routes under names that share a first word, as users write them
  (``ticket_billing`` / ``ticket_technical``, ``team_hr`` / ``team_it``, …).
* ``numbered``: LlamaIndex's ``choice_1`` … ``choice_N`` (the descriptions carry the meaning).
* ``many``: the bench's routes among distractor routes written for the bench, 40+ options in all
  (the items' answers are still the bench's routes, so the accuracy is comparable).
"""

from __future__ import annotations

from collections.abc import Mapping

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
