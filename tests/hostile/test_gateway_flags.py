"""Every ``jev serve`` and ``jev decide`` flag checked at the door.

A table of bad values, one entry per flag of each command, read off argparse itself: a new flag
without an entry fails :func:`test_the_table_covers_every_flag`. Each bad value ends in one line on
stderr and exit status 2, with nothing started (no embedded model, no backend client, no server).
"""

from __future__ import annotations

import json

import pytest

import jev_shared.cli.backends as cli_backends
import jev_shared.cli.decide as cli_decide
import jev_shared.cli.serve as cli_serve
from jev_shared.cli import main, parser

pytestmark = pytest.mark.timeout(60)

NAN, INF = "nan", "inf"
SERVE: dict[str, list[str]] = {
    "--host": ["", "exa mple"], "--port": ["0", "-1", "99999", "http"],
    "--backend-url": ["", "ftp://gpu/v1", "http://", "http://gpu:99999/v1"], "--model": [""],
    "--backend-api": ["soap"], "--no-cache": [], "--api-key-file": ["", "{missing}"],
    "--allowed-host": ["", "a b"], "--max-body-bytes": ["-1", "0", NAN], "--max-questions": ["0", "1.5"],
    "--max-in-flight": ["0"], "--max-calls-per-key": ["0"], "--max-connections": ["0", "-3"],
    "--body-timeout": ["0", INF], "--keep-alive-timeout": [NAN, "-1"], "--timeout": ["-5", NAN, INF],
    "--layout": ["sideways"], "--max-concurrency": ["0"], "--max-retries": ["-1", NAN],
    "--method": ["guess"], "--order": ["", "shuffled"], "--warm": ["", "{missing}", "{not_json}"],
    "--calibration": ["", "{missing}", "{not_json}", "{directory}", "{bad_sets}", "{bad_temperature}"],
    "--keep-states": ["", "{directory}", "{missing_folder}"], "--keep-states-max-bytes": ["0", "-1", NAN, str(64 * 1024 * 1024 + 1)],
    "--workers": ["0", "-2"], "--log-level": ["loud"],
}
DECIDE: dict[str, list[str]] = {
    "--state": [""], "--questions": ["", "{missing}", "{not_json}"],
    "--backend-url": ["", "gpu:8000", "https://"], "--model": [""], "--backend-api": ["soap"], "--no-cache": [],
    "--layout": ["sideways"], "--timeout": ["0", "-1", NAN, INF], "--input": ["", "{missing}"],
    "--output": ["", "{directory}"], "--column": ["", "nope"], "--id-column": [""], "--concurrency": ["0", "-1"],
    "--label": ["", "nope", "team=", "team=id"],
    "--method": ["guess"], "--order": ["", "shuffled"], "--dry-run": [], "--retry-failed": [], "--review-threshold": ["-0.1", "1.5", NAN],
    "--review": ["", "{directory}"], "--no-progress": [], "--keep-states": [],
    "--calibration": ["", "{missing}", "{not_json}", "{directory}", "{bad_sets}", "{bad_temperature}"],
}
#: Flags that take no value: nothing to get wrong (``jev serve --keep-states`` takes the file, ``jev decide``'s is a switch).
SWITCHES = {"serve": {"--no-cache"}, "decide": {"--no-cache", "--dry-run", "--retry-failed", "--no-progress", "--keep-states"}}
TABLES = {"serve": SERVE, "decide": DECIDE}
QUESTIONS = {"team": {"type": "choice", "instructions": "Which team?", "criteria": {"billing": "pay", "tech": "bugs"}}}


def flags(command: str) -> set[str]:
    sub = next(a for a in parser()._actions if a.dest == "command").choices[command]  # argparse's own list
    return {a.option_strings[-1] for a in sub._actions if a.option_strings and a.dest != "help"}


@pytest.mark.parametrize("command", sorted(TABLES))
def test_the_table_covers_every_flag(command):
    table = TABLES[command]
    assert set(table) == flags(command), "every flag needs its bad values here (or is a switch)"
    assert {f for f, bad in table.items() if not bad} == SWITCHES[command]


@pytest.fixture
def nothing_starts(monkeypatch):
    """Whatever would start a backend, a client or a server fails the test."""
    def started(*a, **k):
        raise AssertionError("started something on a bad flag")

    for module in (cli_backends, cli_serve, cli_decide):
        monkeypatch.setattr(module, "backends", started)
    monkeypatch.setattr(cli_backends, "sync_client", started)
    import uvicorn

    monkeypatch.setattr(uvicorn.Server, "run", started)


#: Calibration files (``--calibration``) that parse but are not one: a set's threshold above 1, a temperature below 0.
BAD_FILES = {"bad_sets": {"decision_sets": {"format": "jev-decision-sets/1", "coverage": 0.9, "n": 10,
                                            "thresholds": {"*": 1.5}}},
             "bad_temperature": {"format": "jev-calibration/1", "temperatures": {"*": -1.0}}}


def _fill(value: str, tmp_path) -> str:
    (tmp_path / "not_json.json").write_text("{not json")
    (tmp_path / "dir").mkdir(exist_ok=True)
    for name, body in BAD_FILES.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(body))
    return value.format(missing=tmp_path / "missing.json", not_json=tmp_path / "not_json.json",
                        missing_folder=tmp_path / "nowhere" / "states.jsonl",
                        directory=tmp_path / "dir", **{n: tmp_path / f"{n}.json" for n in BAD_FILES})


def _base(command: str, flag: str, tmp_path) -> list[str]:
    """A command line that is good but for ``flag`` (added after it)."""
    if command == "serve":
        return ["serve", "--backend-url", "http://127.0.0.1:9/v1", "--model", "m"]
    items = tmp_path / "items.csv"
    items.write_text("id,state\n1,hello\n")
    base = ["decide", "--questions", json.dumps(QUESTIONS), "--backend-url", "http://127.0.0.1:9/v1", "--model", "m"]
    batch = flag in ("--output", "--column", "--id-column", "--label", "--concurrency", "--review-threshold", "--review")
    if batch:
        return [*base, "--input", str(items), "--output", str(tmp_path / "out.jsonl")]
    return base if flag == "--input" else [*base, "--state", "hello"]


CASES = [(c, f, v) for c, table in sorted(TABLES.items()) for f, bad in table.items() for v in bad]


@pytest.mark.parametrize("command, flag, value", CASES, ids=[f"{c} {f} {v!r}" for c, f, v in CASES])
def test_a_bad_flag_is_one_line_and_exit_2(command, flag, value, tmp_path, capsys, monkeypatch, nothing_starts):
    monkeypatch.delenv("JEV_API_KEYS", raising=False)
    argv = [*_base(command, flag, tmp_path), flag, _fill(value, tmp_path)]
    try:
        status = main(argv)
    except SystemExit as exc:
        status = exc.code
    err = capsys.readouterr().err.strip()
    assert status == 2, (argv, err)
    assert err and len(err.splitlines()) == 1, err
    assert "Traceback" not in err


def test_version_and_defaults_in_help(capsys):
    from jev_shared.cli import jev_version

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"jev {jev_version()}"
    assert jev_version()[0].isdigit()
    for command in TABLES:
        sub = next(a for a in parser()._actions if a.dest == "command").choices[command]
        text = " ".join(sub.format_help().split())
        for action in sub._actions:
            if action.option_strings and action.default not in (None, False, [], "==SUPPRESS=="):
                assert f"(default: {action.default})" in text, (command, action.option_strings)
