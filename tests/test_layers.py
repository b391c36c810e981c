"""The floors of the house, checked from the source: the engine at the bottom, the applications
(batch, cli, gateway) above it on its public API only, and no import circle anywhere.

Every ``import`` and ``from ... import`` in ``jev_shared`` is read with :mod:`ast` (module level and
inside functions alike), relative imports resolved, and the graph walked. Imports under
``if TYPE_CHECKING:`` are left out: they give type checkers names (the engine's lazy batch exports) and
never run, which ``test_importing_the_engine_loads_no_application`` checks in a fresh interpreter.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import jev_shared

ROOT = Path(jev_shared.__file__).resolve().parent
APPS = ("jev_shared.batch", "jev_shared.cli", "jev_shared.gateway")
#: Engine modules an application may import besides the top-level names: documented public modules.
PUBLIC_MODULES = {"jev_shared", "jev_shared.local", "jev_shared.calibration", "jev_shared.redact", "jev_shared.files"}
#: Which application may stand on which (the command line drives the other two).
APP_MAY_USE = {"jev_shared.cli": {"jev_shared.batch", "jev_shared.gateway"}, "jev_shared.batch": set(),
               "jev_shared.gateway": set()}


def module_name(path: Path) -> str:
    parts = ["jev_shared", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in ROOT.rglob("*.py")}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of ``tree`` but the bodies of ``if TYPE_CHECKING:`` (their ``else:`` runs, so it is kept)."""
    out: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))
    return out


def imports(name: str, path: Path, known: set[str]) -> set[tuple[str, tuple[str, ...]]]:
    """(module imported, names taken from it) for every import statement in ``path``."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[tuple[str, tuple[str, ...]]] = set()
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {(a.name, ()) for a in node.names if a.name.startswith("jev_shared")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1], *base.split(".")])
                base = base.rstrip(".")
            if not base.startswith("jev_shared"):
                continue
            names = tuple(a.name for a in node.names)
            subs = {f"{base}.{n}" for n in names if f"{base}.{n}" in known}
            found |= {(s, ()) for s in subs}
            rest = tuple(n for n in names if f"{base}.{n}" not in known)
            if rest or not subs:
                found.add((base, rest))
    return found


def graph() -> dict[str, set[tuple[str, tuple[str, ...]]]]:
    mods = modules()
    return {name: imports(name, path, set(mods)) for name, path in mods.items()}


def app_of(name: str) -> str | None:
    return next((a for a in APPS if name == a or name.startswith(a + ".")), None)


def test_the_engine_never_imports_an_application():
    upward = [(m, dep) for m, deps in graph().items() if app_of(m) is None
              for dep, _ in deps if app_of(dep) is not None]
    assert upward == []


def test_applications_use_only_the_engines_public_api():
    public = set(jev_shared.__all__)
    bad = []
    for m, deps in graph().items():
        app = app_of(m)
        if app is None:
            continue
        for dep, names in deps:
            other = app_of(dep)
            if other == app:
                continue
            if other is not None:
                if other not in APP_MAY_USE[app]:
                    bad.append((m, dep))
            elif dep not in PUBLIC_MODULES:
                if not defines_public_names(dep, names):
                    bad.append((m, dep))
            elif dep == "jev_shared" and not set(names) <= public:
                bad.append((m, f"jev_shared: {sorted(set(names) - public)}"))
    assert bad == []


def defines_public_names(module: str, names: tuple[str, ...]) -> bool:
    """Whether every name taken from ``module`` is a public name of the engine that ``module`` defines: an
    application may import the engine's public names from where they are defined, not only from the package root
    (importing the root from below it would run an arrow back up)."""
    if not names:
        return False
    mod = importlib.import_module(module)
    return all(n in jev_shared.__all__ and getattr(mod, n, None) is getattr(jev_shared, n)
               and getattr(getattr(mod, n), "__module__", module) == module for n in names)


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        path.pop()
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_import_circle_between_the_floors():
    """Packages as nodes: the engine, each application. An edge for every import between them."""
    floor = lambda m: app_of(m) or "engine"  # noqa: E731
    edges: dict[str, set[str]] = {}
    for m, deps in graph().items():
        for dep, _ in deps:
            if floor(dep) != floor(m):
                edges.setdefault(floor(m), set()).add(floor(dep))
    assert _cycle(edges) is None, _cycle(edges)


def test_no_import_circle_inside_an_application():
    mods = set(modules())
    edges = {m: {d for d, _ in deps if d in mods and app_of(d) == app_of(m)}
             for m, deps in graph().items() if app_of(m)}
    assert _cycle(edges) is None, _cycle(edges)


def test_importing_the_engine_loads_no_application():
    code = ("import sys, jev_shared; from jev_shared import SystemOneClient, Choice; "
            "print(sorted(m for m in sys.modules if m.split('.')[:2] in "
            "(['jev_shared','batch'], ['jev_shared','cli'], ['jev_shared','gateway'])))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_batch_names_are_still_importable_from_the_engine_and_the_batch_package():
    from jev_shared import decide_batch as top
    from jev_shared.batch import adecide_batch, decide_batch, stream_batch

    assert top is decide_batch and callable(stream_batch) and callable(adecide_batch)


#: What the embedded server's layer (local/) never stands on: the flows that write the prompts and plan the calls.
FLOWS = {"jev_shared.flows", "jev_shared.asking", "jev_shared.priors", "jev_shared.readon", "jev_shared.prompt",
         "jev_shared.planning", "jev_shared.drive", "jev_shared.client", "jev_shared.pair"}
#: What the kept prompts and the first round stand on besides local/ itself: the calls and the files.
AROUND_THE_SEND = {"jev_shared.local.slots", "jev_shared.local.first_round"}


def _local(name: str) -> bool:
    return name == "jev_shared.local" or name.startswith("jev_shared.local.")


def test_the_local_layer_never_imports_the_flows():
    bad = [(m, dep) for m, deps in graph().items() if _local(m) for dep, _ in deps if dep in FLOWS]
    assert bad == []


def test_the_kept_prompts_stand_on_the_calls_and_the_files_only():
    bad = [(m, dep) for m, deps in graph().items() if m in AROUND_THE_SEND for dep, _ in deps
           if not _local(dep) and dep not in ("jev_shared.calls", "jev_shared.files")]
    assert bad == []


def test_the_local_layer_reads_no_request_messages():
    """What a request is for is its ``intent``, which prompt its ``prompt.key``: never worked out from its messages
    (``call.kwargs["messages"]``, ``.get("messages")``, ``prompt.messages``)."""
    reads = []
    for name, path in modules().items():
        if not _local(name):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            key = node.slice if isinstance(node, ast.Subscript) else \
                node.args[0] if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "get" and node.args else None
            if isinstance(key, ast.Constant) and key.value in ("messages", "input"):
                reads.append((name, node.lineno))
            if isinstance(node, ast.Attribute) and node.attr == "messages":
                reads.append((name, node.lineno))
    assert reads == []
