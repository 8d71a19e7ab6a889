"""detektiv's headless core. Never imports textual, rich or the tui package.

The public API is what `__all__` lists; everything else is private and may change.
"""

from engine.config import Config, ProviderConfig, load_config, save_config
from engine.errors import (
    AllProvidersFailed,
    AuthError,
    BadResponseError,
    ConfigError,
    DetektivError,
    FirstTokenTimeout,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeout,
    RateLimitedError,
    RequestError,
    ServerError,
    StallTimeout,
    TotalTimeout,
)
from engine.paths import Paths
from engine.providers import (
    Done,
    Health,
    Message,
    Provider,
    StreamEvent,
    StreamRequest,
    TokenDelta,
    Usage,
    create_provider,
    discover_ollama,
    select_provider,
)
from engine.router import (
    Attempt,
    PartialDiscarded,
    ProviderEvent,
    RoutedCompletion,
    Router,
    RouterEvent,
    chain_for,
)
from engine.secrets import redact
from engine.structured import Completion, complete, complete_json
from engine.text import strip_control

__version__ = "0.1.0"

__all__ = [
    "AllProvidersFailed",
    "Attempt",
    "AuthError",
    "BadResponseError",
    "Completion",
    "Config",
    "ConfigError",
    "DetektivError",
    "Done",
    "FirstTokenTimeout",
    "Health",
    "Message",
    "PartialDiscarded",
    "Paths",
    "Provider",
    "ProviderConfig",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderEvent",
    "ProviderTimeout",
    "RateLimitedError",
    "RequestError",
    "RoutedCompletion",
    "Router",
    "RouterEvent",
    "ServerError",
    "StallTimeout",
    "StreamEvent",
    "StreamRequest",
    "TokenDelta",
    "TotalTimeout",
    "Usage",
    "chain_for",
    "complete",
    "complete_json",
    "create_provider",
    "discover_ollama",
    "load_config",
    "redact",
    "save_config",
    "select_provider",
    "strip_control",
    "__version__",
]
