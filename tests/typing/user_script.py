"""A user's own script, type-checked from outside the checkout against the documented install (`pip install -e`).

scripts/typecheck.sh copies it to a scratch folder and runs mypy and pyright there. Each
`# type: ignore[...]` below marks a line that is wrong on purpose: were a jev package unresolved, or its
names typed `Any`, the line would not be an error, and mypy's --warn-unused-ignores would fail the check.
"""

from jev_langchain import JevGate, JevRouter
from jev_llamaindex import JevSingleSelector
from jev_shared import Choice, Noul, SystemOneClient, SystemOneResponse
from jev_shared.local import LocalServer

team = Choice(instructions="Which team?", criteria={"billing": "payments", "technical": "bugs"})
spam = Noul(instructions="This is spam.")
count: int = team  # type: ignore[assignment]
server: LocalServer = spam  # type: ignore[assignment]


def route(client: SystemOneClient) -> str:
    resp: SystemOneResponse = client.system_one(state="I was charged twice", questions={"team": team})
    wrong: int = resp.choices["team"].choice  # type: ignore[assignment]
    return resp.choices["team"].choice + str(wrong)


router_kind: type[JevRouter] = JevGate  # type: ignore[assignment]
selector_kind: type[JevSingleSelector] = JevSingleSelector
