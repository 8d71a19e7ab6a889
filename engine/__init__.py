"""detektiv's headless core. Never imports textual, rich or the tui package.

The public API is what `__all__` lists, written once in `__init__.pyi` (which type checkers
read); everything else is private and may change. Names are imported on first use
(`lazy_loader` reads the stub), so `import engine` — and the app's first frame — pays only for
what it touches.
"""

import sys
from typing import Any

import lazy_loader

# httpx imports its command-line client when click is installed (uvicorn, which the MCP SDK
# serves HTTP with, brings it): click, rich and pygments, ~50 ms of every start and a UI
# library in a headless engine. Marked absent, httpx defines its stand-in instead.
if "httpx" not in sys.modules:
    sys.modules.setdefault("httpx._main", None)  # type: ignore[assignment]

_attached, __dir__, _names = lazy_loader.attach_stub(__name__, __file__)


def __getattr__(name: str) -> Any:
    """A public name, imported on first use; `__version__` read from the installed package
    then too (`importlib.metadata` is ~10 ms of a cold start that never asks for it)."""
    if name != "__version__":
        return _attached(name)
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("detektiv")
    except PackageNotFoundError:  # run from a source tree that was never installed
        found = "0+unknown"
    globals()["__version__"] = found
    return found


__all__ = [*_names, "__version__"]
