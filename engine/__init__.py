"""detektiv's headless core. Never imports textual, rich or the tui package.

The public API is what `__all__` lists, written once in `__init__.pyi` (which type checkers
read); everything else is private and may change. Names are imported on first use
(`lazy_loader` reads the stub), so `import engine` — and the app's first frame — pays only for
what it touches.
"""

from typing import Any

import lazy_loader

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
