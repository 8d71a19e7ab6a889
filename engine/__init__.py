"""detektiv's headless core. Never imports textual, rich or the tui package.

The public API is what `__all__` lists, written once in `__init__.pyi` (which type checkers
read); everything else is private and may change. Names are imported on first use
(`lazy_loader` reads the stub), so `import engine` — and the app's first frame — pays only for
what it touches.
"""

from importlib.metadata import PackageNotFoundError, version

import lazy_loader

__getattr__, __dir__, _names = lazy_loader.attach_stub(__name__, __file__)

try:
    __version__ = version("detektiv")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [*_names, "__version__"]
