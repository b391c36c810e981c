"""Run one embedded model the way a user's process does, with the environment it was started with (HF_ENDPOINT,
HF_HOME, HF_HUB_OFFLINE are read as huggingface_hub reads them: at import).

``python -m tests.helpers.hub_child SPEC``: SPEC is the JSON of a :class:`SplitModel` (its ``hub`` a
:class:`HubFile`'s fields), registered under its name; the model is started with ``LocalServer``, asked one
question, and its file asked for again (the second time from a cache). Prints one JSON line: that path and the
answer.
"""

from __future__ import annotations

import json
import sys


def main(spec: dict) -> dict:
    from jev_shared import Noul, SystemOneClient
    from jev_shared.local import MODELS, HubFile, LocalServer, SplitModel

    hub = spec.pop("hub", None)
    model = SplitModel(**{**spec, "parts": tuple(tuple(p) for p in spec["parts"])},
                       hub=HubFile(**hub) if hub else None)
    MODELS[model.name] = model
    with LocalServer(model.name, n_parallel=1, n_ctx=2048) as srv:
        client = SystemOneClient(srv.client(), model=srv.model)
        resp = client.system_one("I was charged twice, please refund.",
                                 {"spam": Noul(instructions="This message is spam.")})
        again = model.path()
    return {"path": str(again), "noul": resp.nouls["spam"].noul}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
