"""Record vcrpy cassettes into cassettes/ from the embedded server, or any OpenAI-compatible endpoint.

    python scripts/record_cassettes.py                 # the embedded llama.cpp server (SmolLM2, by name)
    JEV_RECORD_BASE_URL=https://... JEV_RECORD_API_KEY=... JEV_RECORD_MODEL=... \
        python scripts/record_cassettes.py --prefix myprovider_

Credentials are scrubbed before a cassette is written (request headers, response headers that
carry ids or cookies); `cassette_prompt` is off so a re-recording is byte-stable. Each scenario
is one cassette; cassettes/README.md lists them with the server, model and date.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import vcr

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jev_shared import JevError  # noqa: E402
from tests.scenarios import scenarios  # noqa: E402

CASSETTES = ROOT / "cassettes"
SCRUB_REQUEST = ["authorization", "api-key", "x-api-key", "openai-organization", "openai-project", "cookie"]
SCRUB_RESPONSE = {"set-cookie", "openai-organization", "openai-project", "x-request-id", "cf-ray", "request-id"}


def scrub_response(response: dict[str, Any]) -> dict[str, Any]:
    response["headers"] = {k: v for k, v in response["headers"].items() if k.lower() not in SCRUB_RESPONSE}
    return response


def recorder() -> vcr.VCR:
    return vcr.VCR(
        cassette_library_dir=str(CASSETTES),
        record_mode="all",
        match_on=["method", "path", "body"],
        filter_headers=SCRUB_REQUEST,
        before_record_response=scrub_response,
        decode_compressed_response=True,
    )


@contextlib.contextmanager
def endpoint() -> Iterator[tuple[Any, str, str]]:
    """(openai client, model, server description): the env-named endpoint or the embedded server."""
    import openai

    base = os.environ.get("JEV_RECORD_BASE_URL")
    if base:
        client = openai.OpenAI(base_url=base, api_key=os.environ.get("JEV_RECORD_API_KEY", "none"))
        yield client, os.environ["JEV_RECORD_MODEL"], base.split("//")[-1].split("/")[0]
        return
    from jev_shared.local import WIRE_MODEL, LocalServer

    with LocalServer(WIRE_MODEL) as srv:  # the fast wire model, by name (LocalServer() is Qwen)
        # a plain client, as the replaying tests use: srv.client() would skip discovery and ask /tokenize
        yield openai.OpenAI(base_url=srv.base_url, api_key="local"), srv.model, "embedded llama.cpp (xllamacpp)"


sys.path.insert(0, str(Path(__file__).resolve().parent))
import cassettes_readme  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prefix", default="", help="prefix for cassette names (another provider)")
    parser.add_argument("only", nargs="*", help="record only these scenarios")
    args = parser.parse_args()
    CASSETTES.mkdir(exist_ok=True)
    index_path = CASSETTES / "recorded.json"
    index = json.loads(index_path.read_text()) if index_path.exists() else {}
    with endpoint() as (client, model, server):
        for name, run in scenarios(client, model).items():
            if args.only and name not in args.only:
                continue
            cassette = f"{args.prefix}{name}"
            path = CASSETTES / f"{cassette}.yaml"
            path.unlink(missing_ok=True)
            with recorder().use_cassette(path.name):
                try:
                    result = run()
                    outcome = "answered"
                except JevError as exc:
                    result, outcome = None, f"{type(exc).__name__}: {exc}"
            index[cassette] = {"server": server, "model": model, "date": dt.date.today().isoformat(),
                               "outcome": outcome}
            print(f"{cassette}: {outcome}" + (f" {dict(result.answers)}" if hasattr(result, "answers") else ""))
    index_path.write_text(json.dumps(dict(sorted(index.items())), indent=1) + "\n")
    cassettes_readme.main()


if __name__ == "__main__":
    main()
