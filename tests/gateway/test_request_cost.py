"""The settings the gateway's per-request instruction cuts rest on: each keeps what it replaced."""

from __future__ import annotations

import json
import logging

from fastapi import FastAPI

from jev_shared.gateway import Backend, GatewayConfig
from jev_shared.gateway.app import create_app
from jev_shared.gateway.observe import ACCESS_LOG, log_access
from jev_shared.gateway.service import Gateway


def test_fastapis_own_telemetry_is_off_through_its_setting() -> None:
    app = create_app(GatewayConfig(backends={"stub": Backend("http://127.0.0.1:9/v1", "stub")}))
    inner = app
    while not isinstance(inner, FastAPI):
        inner = inner.app
    assert not inner._native_telemetry.enabled()


def test_the_access_line_is_an_info_record_of_the_access_logger(caplog) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOG.name)
    key = "sk-" + "a1" * 16  # a key-shaped secret, built here so no credential-like text is committed
    log_access({"status": 200, "key": key}, [key])
    (record,) = [r for r in caplog.records if r.name == ACCESS_LOG.name]
    assert record.levelno == logging.INFO and record.funcName == "log_access"
    line = json.loads(record.getMessage())
    assert line["status"] == 200 and key not in record.getMessage() and "sk-a1a1" not in record.getMessage()


def test_the_access_logger_off_logs_nothing(caplog) -> None:
    caplog.set_level(logging.WARNING, logger=ACCESS_LOG.name)
    log_access({"status": 200}, [])
    assert not [r for r in caplog.records if r.name == ACCESS_LOG.name]


def test_slots_are_taken_and_given_back_even_when_the_block_fails() -> None:
    gw = Gateway(GatewayConfig(backends={}, max_calls_per_key=3))
    try:
        with gw._holding("k", 2):
            assert gw.in_flight == 1 and gw.key_calls["k"] == 2
            raise RuntimeError("the engine failed")
    except RuntimeError:
        pass
    assert gw.in_flight == 0 and "k" not in gw.key_calls
