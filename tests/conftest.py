"""Shared fixtures: the embedded llama.cpp server (real, in-process) and cassette replay."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Every test starts with an empty memory: what one test's LocalServer client learns (priors, surfaces)
# must not reach another's through the per-user cache file. Tests of the cache point it at a temp file.
os.environ["JEV_NO_CACHE"] = "1"

CASSETTES = Path(__file__).resolve().parent.parent / "cassettes"


def pytest_report_collectionfinish(config, start_path, items):
    """The suite's size, up front, where scripts/test.sh names the suite (``JEV_TEST_SUITE``)."""
    suite = os.environ.get("JEV_TEST_SUITE")
    if not suite:
        return []
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    left = len(reporter.stats.get("deselected", [])) if reporter is not None else 0
    return [f"{suite}: {len(items)} tests" + (f" ({left} left out by -m)" if left else "")]


@pytest.fixture(scope="session")
def local_server():
    """The embedded SmolLM2 server (asked for by name: LocalServer() is Qwen), once per session (about half a second)."""
    from jev_shared.local import WIRE_MODEL, LocalServer

    with LocalServer(WIRE_MODEL) as srv:
        yield srv


@pytest.fixture
def local_client(local_server):
    """A SystemOneClient on the embedded server; its SDK client closed after the test (its connections go now)."""
    from jev_shared import SystemOneClient

    sdk = local_server.client()
    yield SystemOneClient(sdk, model=local_server.model)
    sdk.close()


@pytest.fixture
def documented():
    """Replay a cassette written from a provider's documented shapes (matched on method and path)."""
    import vcr

    def use(name: str):
        return vcr.VCR(cassette_library_dir=str(CASSETTES), record_mode="none",
                       match_on=["method", "path"]).use_cassette(f"{name}.yaml")

    return use


@pytest.fixture
def cassette():
    """Replay a recorded cassette strictly: a request that was not recorded fails loudly."""
    import vcr

    def use(name: str):
        my_vcr = vcr.VCR(
            cassette_library_dir=str(CASSETTES),
            record_mode="none",
            match_on=["method", "path", "body"],
            decode_compressed_response=True,
        )
        return my_vcr.use_cassette(f"{name}.yaml", allow_playback_repeats=False)

    return use
