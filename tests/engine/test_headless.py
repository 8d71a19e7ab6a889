"""The engine stays headless and light: no UI toolkit, no provider SDK at import time."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import engine
from tests.support.servers import ROOT

FORBIDDEN = ("textual", "rich", "tui", "openai", "ollama", "anthropic", "xllamacpp", "jsonschema")


def imported_by(module: str) -> set[str]:
    code = (
        f"import sys, json; import {module}; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout))


def test_import_engine_pulls_no_ui_and_no_sdk() -> None:
    assert imported_by("engine").isdisjoint(FORBIDDEN)


def test_every_engine_module_is_headless() -> None:
    """Every engine module imported in one fresh process: if any of them pulled in a UI
    module, it would be in `sys.modules` at the end (one process, not one per module)."""
    modules = [m.name for m in pkgutil.walk_packages(engine.__path__, "engine.")]
    assert "engine.providers._openai" in modules and len(modules) > 90
    code = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    leaked = set(json.loads(out.stdout)) & {"textual", "rich", "tui"}
    assert not leaked, f"importing the engine pulls in {leaked}"


def test_public_api_is_exactly_all() -> None:
    public = {name for name in dir(engine) if not name.startswith("_")}
    submodules = {m.name for m in pkgutil.iter_modules(engine.__path__)}
    assert public - submodules == set(engine.__all__) - {"__version__"}
    for name in engine.__all__:
        assert getattr(engine, name) is not None


def test_the_config_floor_does_not_reach_up_to_the_model_store() -> None:
    """`engine.gguf.store` reads the config; the config (a lower floor) never imports it, not
    even inside a function: which model ships as the default is `engine.config.shipped`."""
    import ast

    reaching = []
    for path in (ROOT / "engine" / "config").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            modules = ([node.module or ""] if isinstance(node, ast.ImportFrom) else
                       [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            reaching += [f"{path.name}:{node.lineno} {m}" for m in modules
                         if m.startswith("engine.gguf")]
    assert reaching == []
