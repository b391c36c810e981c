"""Regenerate cassettes/README.md from the two indexes the cassette scripts keep."""

from __future__ import annotations

import json
from pathlib import Path

CASSETTES = Path(__file__).resolve().parent.parent / "cassettes"

HEAD = """# Cassettes

vcrpy recordings that the tests replay with `record_mode="none"`, so a request that was not
recorded fails loudly instead of calling out. Credentials are scrubbed before a cassette is
written (request `authorization`, `api-key`, `x-api-key`, organisation headers; response headers
that carry ids or cookies).

## Recorded from real servers

Made by `python scripts/record_cassettes.py` (the embedded server by default; any
OpenAI-compatible endpoint with `JEV_RECORD_BASE_URL`, `JEV_RECORD_API_KEY`, `JEV_RECORD_MODEL`
and `--prefix`). The scenarios live in `tests/scenarios.py`; replays match on the request body,
so they also prove the engine still sends what the server answered. Re-record after changing a
prompt or a request field.

| cassette | server | model | date | outcome |
|---|---|---|---|---|
"""

DOCUMENTED = """
## Written from documented shapes (not recordings)

No server on this machine refuses, filters, rate-limits or drops logprobs, so these are written by
`python scripts/write_documented_cassettes.py` from the providers' documented shapes
(`shared/PROVIDERS.md` and the providers' API references). Replays match on method and path only.

| cassette | documented behaviour |
|---|---|
"""


def main() -> None:
    recorded = json.loads((CASSETTES / "recorded.json").read_text()) if (CASSETTES / "recorded.json").exists() else {}
    documented = json.loads((CASSETTES / "documented.json").read_text()) if (CASSETTES / "documented.json").exists() else {}
    text = HEAD + "".join(
        f"| `{name}` | {r['server']} | {r['model']} | {r['date']} | {r['outcome'].replace('|', '/')} |\n"
        for name, r in recorded.items()
    )
    text += DOCUMENTED + "".join(f"| `{name}` | {source} |\n" for name, source in documented.items())
    (CASSETTES / "README.md").write_text(text)


if __name__ == "__main__":
    main()
