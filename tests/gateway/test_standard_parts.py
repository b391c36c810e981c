"""The gateway on standard parts. No module of it imports a private name of uvicorn, Starlette,
httpx or httpcore (a name or a module path with a leading underscore, or uvicorn's protocol and loop
internals, which an upgrade may change), so nothing of theirs is subclassed that they do not document;
and the request path has one implementation: no fast path in front of FastAPI, no HTTP client of our own.
"""

from __future__ import annotations

import ast
from pathlib import Path

import jev_shared.gateway

GATEWAY = Path(jev_shared.gateway.__file__).parent
OTHERS = ("uvicorn", "starlette", "httpx", "httpcore")
#: uvicorn's modules that are not its documented API (the server's protocol classes, its loop setup).
INTERNAL = ("uvicorn.protocols", "uvicorn.loops", "uvicorn.lifespan", "uvicorn.middleware")


def _imports(tree: ast.AST) -> list[tuple[str, str]]:
    """(module, name) of every import; ``import a.b`` is ("a.b", "")."""
    out: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, "") for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out += [(node.module, alias.name) for alias in node.names]
    return out


def test_no_gateway_module_imports_a_private_name_of_the_server_or_the_http_client():
    bad = []
    for path in sorted(GATEWAY.glob("*.py")):
        for module, name in _imports(ast.parse(path.read_text())):
            if module.split(".")[0] not in OTHERS:
                continue
            private = any(part.startswith("_") for part in [*module.split("."), name] if part)
            if private or module.startswith(INTERNAL):
                bad.append(f"{path.name}: from {module} import {name}")
    assert bad == []


def test_the_request_path_has_one_implementation():
    names = {p.name for p in GATEWAY.glob("*.py")}
    assert not names & {"fastpath.py", "backend_http.py"}
    app = (GATEWAY / "app.py").read_text()
    assert "FastPath" not in app and "transport=" not in (GATEWAY / "engines.py").read_text()


def test_every_route_of_systemone_calls_the_one_function():
    """``/v1/systemone`` is served by a plain Starlette route ahead of its FastAPI route: both call the
    same endpoint, so there is still one implementation of the request path."""
    from fastapi import FastAPI
    from fastapi.routing import APIRoute
    from starlette.routing import Route

    from jev_shared.gateway import Backend, GatewayConfig
    from jev_shared.gateway.app import create_app
    from jev_shared.gateway.routes import decisions, systemone

    inner = create_app(GatewayConfig(backends={"m": Backend("http://127.0.0.1:9/v1", "m")}, cache=False))
    while not isinstance(inner, FastAPI):
        inner = inner.app
    plain = [r for r in inner.routes if isinstance(r, Route) and r.path == "/v1/systemone"]
    served = plain + [r for r in decisions.routes if isinstance(r, Route) and r.path == "/v1/systemone"]
    assert {type(r) for r in served} == {Route, APIRoute} and all(r.endpoint is systemone for r in served)
