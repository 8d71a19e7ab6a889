"""The public API: what the front ends may use of the engine, and nothing more.

As httpx holds its exported members to a list, these hold `engine.__all__` to what `tui/`
imports, plus the engine's error tree and event types (which a front end matches on whether or
not it names each one): a name nobody uses fails here, so the API shrinks instead of growing.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import engine
from engine.models.event import Event

ROOT = Path(__file__).resolve().parents[2]


FRONT_ENDS = ("tui", "detektiv")
"""The app and the CLI, and the Inspect AI extension."""


def _front_end_imports() -> tuple[set[str], list[str]]:
    """Names the front ends import from `engine`, and every import of an engine module
    instead."""
    names: set[str] = set()
    inside: list[str] = []
    for path in (p for front in FRONT_ENDS for p in (ROOT / front).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and \
                    node.module.split(".")[0] == "engine":
                if node.module != "engine":
                    inside.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.module}")
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.Import):
                inside += [f"{path.relative_to(ROOT)}:{node.lineno} {alias.name}"
                           for alias in node.names if alias.name.split(".")[0] == "engine"]
    return names, inside


def _kinds(name: str) -> bool:
    """An error of the tree or an event type (or a union of them): public by nature."""
    value = getattr(engine, name)
    if inspect.isclass(value):
        return issubclass(value, (engine.DetektivError, Event)) or name == "Record"
    return name.endswith("Event")  # the unions: InterrogationEvent, OracleEvent, …


def test_the_front_ends_import_only_engine_itself() -> None:
    names, inside = _front_end_imports()
    assert inside == [], "a front end reaches into an engine module"
    assert names <= set(engine.__all__), f"not public: {sorted(names - set(engine.__all__))}"


def test_every_public_name_is_used_by_a_front_end_or_is_an_error_or_event() -> None:
    names, _ = _front_end_imports()
    unused = sorted(n for n in engine.__all__
                    if n not in names and n != "__version__" and not _kinds(n))
    assert unused == [], f"public but used by no front end (make it private): {unused}"


def test_the_public_api_is_small_and_written_once() -> None:
    stub = (ROOT / "engine" / "__init__.pyi").read_text()
    tree = ast.parse(stub)
    stubbed = [alias.name for node in tree.body if isinstance(node, ast.ImportFrom)
               for alias in node.names]
    assert len(stubbed) == len(set(stubbed)), "a name is listed twice"
    assert sorted([*stubbed, "__version__"]) == sorted(engine.__all__)
    for node in tree.body:  # the re-export form, which type checkers honour
        if isinstance(node, ast.ImportFrom):
            assert all(alias.asname == alias.name for alias in node.names), node.module
    assert len((ROOT / "engine" / "__init__.py").read_text().splitlines()) <= 150


def test_the_version_comes_from_the_package_metadata() -> None:
    from importlib.metadata import version

    assert engine.__version__ == version("detektiv")
    assert "0.1.0" not in (ROOT / "engine" / "__init__.py").read_text()


def test_screens_see_the_app_through_host_and_never_import_it(paths: engine.Paths) -> None:
    """No import circle: the app imports its screens, no screen or widget imports the app;
    what they use of it is `tui.host.Host`, which the app class satisfies."""
    from tui.app import build_app
    from tui.host import Host

    importers = []
    for folder in ("screens", "widgets"):
        for path in (ROOT / "tui" / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module == "tui.app":
                    importers.append(str(path.relative_to(ROOT)))
    assert importers == []
    app = build_app(paths)
    assert isinstance(app, Host)
    assert app.key_for("oracle-mark", "space") == "space" and app.current_session is None


def test_no_front_end_reaches_past_the_workspace_into_a_store() -> None:
    """Listing, loading, exporting and the cache go through the workspace's parts
    (`workspace.sessions`, `workspace.cache`): a front end never touches a store."""
    found = [f"{path.relative_to(ROOT)}:{number}"
             for front in FRONT_ENDS for path in (ROOT / front).rglob("*.py")
             for number, line in enumerate(path.read_text().splitlines(), start=1)
             if re.search(r"\.store\b", line)]
    assert found == []
