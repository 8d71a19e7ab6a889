"""detektiv's headless core. Never imports textual, rich or the tui package.

The public API is what `__all__` lists; everything else is private and may change. Names are
imported on first use, so `import engine` (and the app's first frame) pays only for what it
touches.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.config import Config, InterrogationConfig, ProviderConfig, load_config, save_config
    from engine.errors import (
        AllProvidersFailed,
        AuthError,
        BadResponseError,
        ConfigError,
        DetektivError,
        FirstTokenTimeout,
        InterrogationFailed,
        ProviderConnectionError,
        ProviderError,
        ProviderTimeout,
        RateLimitedError,
        RequestError,
        ServerError,
        SessionBusy,
        SessionCorrupt,
        SessionError,
        SessionNotFound,
        StallTimeout,
        TotalTimeout,
    )
    from engine.export import to_json, to_markdown
    from engine.interrogation import Interrogation
    from engine.models.events import (
        AnswerCutOff,
        AnswerDelta,
        AuditReady,
        Discarded,
        Finished,
        GapAnalysisReady,
        InterrogationEvent,
        PairCompleted,
        Phase,
        ProviderChosen,
        QuestionDelta,
        Record,
        Started,
        TrailAdded,
    )
    from engine.models.session import (
        ANSWER_CUT_OFF,
        AuditResult,
        AuditTrailEntry,
        Contradiction,
        Gap,
        GapAnalysis,
        Hypothesis,
        InterrogationSession,
        QuestionAnswerPair,
        check_resumable,
        consistency_score,
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
    from engine.roles import apply_roles
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
    from engine.storage.atomic import atomic_write_text
    from engine.storage.index import SessionSummary
    from engine.storage.sessions import SessionJournal, SessionStore
    from engine.structured import Completion, complete, complete_json
    from engine.text import strip_control
    from engine.workspace import Run, Workspace

_LAZY: dict[str, str] = {
    "AllProvidersFailed": "engine.errors",
    "Run": "engine.workspace",
    "Workspace": "engine.workspace",
    "AnswerCutOff": "engine.models.events",
    "AnswerDelta": "engine.models.events",
    "Attempt": "engine.router",
    "AuditReady": "engine.models.events",
    "ANSWER_CUT_OFF": "engine.models.session",
    "AuditResult": "engine.models.session",
    "AuditTrailEntry": "engine.models.session",
    "AuthError": "engine.errors",
    "BadResponseError": "engine.errors",
    "Completion": "engine.structured",
    "Config": "engine.config",
    "ConfigError": "engine.errors",
    "Contradiction": "engine.models.session",
    "DetektivError": "engine.errors",
    "Discarded": "engine.models.events",
    "Done": "engine.providers",
    "Finished": "engine.models.events",
    "FirstTokenTimeout": "engine.errors",
    "Gap": "engine.models.session",
    "GapAnalysis": "engine.models.session",
    "GapAnalysisReady": "engine.models.events",
    "Health": "engine.providers",
    "Hypothesis": "engine.models.session",
    "Interrogation": "engine.interrogation",
    "InterrogationConfig": "engine.config",
    "InterrogationEvent": "engine.models.events",
    "InterrogationFailed": "engine.errors",
    "InterrogationSession": "engine.models.session",
    "Message": "engine.providers",
    "PairCompleted": "engine.models.events",
    "PartialDiscarded": "engine.router",
    "Paths": "engine.paths",
    "Phase": "engine.models.events",
    "Provider": "engine.providers",
    "ProviderChosen": "engine.models.events",
    "ProviderConfig": "engine.config",
    "ProviderConnectionError": "engine.errors",
    "ProviderError": "engine.errors",
    "ProviderEvent": "engine.router",
    "ProviderTimeout": "engine.errors",
    "QuestionAnswerPair": "engine.models.session",
    "QuestionDelta": "engine.models.events",
    "RateLimitedError": "engine.errors",
    "Record": "engine.models.events",
    "RequestError": "engine.errors",
    "RoutedCompletion": "engine.router",
    "Router": "engine.router",
    "RouterEvent": "engine.router",
    "ServerError": "engine.errors",
    "SessionBusy": "engine.errors",
    "SessionCorrupt": "engine.errors",
    "SessionError": "engine.errors",
    "SessionJournal": "engine.storage.sessions",
    "SessionNotFound": "engine.errors",
    "SessionStore": "engine.storage.sessions",
    "SessionSummary": "engine.storage.index",
    "StallTimeout": "engine.errors",
    "Started": "engine.models.events",
    "StreamEvent": "engine.providers",
    "StreamRequest": "engine.providers",
    "TokenDelta": "engine.providers",
    "TotalTimeout": "engine.errors",
    "TrailAdded": "engine.models.events",
    "Usage": "engine.providers",
    "apply_roles": "engine.roles",
    "atomic_write_text": "engine.storage.atomic",
    "chain_for": "engine.router",
    "check_resumable": "engine.models.session",
    "complete": "engine.structured",
    "complete_json": "engine.structured",
    "consistency_score": "engine.models.session",
    "create_provider": "engine.providers",
    "discover_ollama": "engine.providers",
    "load_config": "engine.config",
    "redact": "engine.secrets",
    "save_config": "engine.config",
    "select_provider": "engine.providers",
    "strip_control": "engine.text",
    "to_json": "engine.export",
    "to_markdown": "engine.export",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__version__ = "0.1.0"

__all__ = [
    "Run",
    "Workspace",
    "AllProvidersFailed",
    "AnswerCutOff",
    "AnswerDelta",
    "Attempt",
    "AuditReady",
    "ANSWER_CUT_OFF",
    "AuditResult",
    "AuditTrailEntry",
    "AuthError",
    "BadResponseError",
    "Completion",
    "Config",
    "ConfigError",
    "Contradiction",
    "DetektivError",
    "Discarded",
    "Done",
    "Finished",
    "FirstTokenTimeout",
    "Gap",
    "GapAnalysis",
    "GapAnalysisReady",
    "Health",
    "Hypothesis",
    "Interrogation",
    "InterrogationConfig",
    "InterrogationEvent",
    "InterrogationFailed",
    "InterrogationSession",
    "Message",
    "PairCompleted",
    "PartialDiscarded",
    "Paths",
    "Phase",
    "Provider",
    "ProviderChosen",
    "ProviderConfig",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderEvent",
    "ProviderTimeout",
    "QuestionAnswerPair",
    "QuestionDelta",
    "RateLimitedError",
    "Record",
    "RequestError",
    "RoutedCompletion",
    "Router",
    "RouterEvent",
    "ServerError",
    "SessionBusy",
    "SessionCorrupt",
    "SessionError",
    "SessionJournal",
    "SessionNotFound",
    "SessionStore",
    "SessionSummary",
    "StallTimeout",
    "Started",
    "StreamEvent",
    "StreamRequest",
    "TokenDelta",
    "TotalTimeout",
    "TrailAdded",
    "Usage",
    "apply_roles",
    "atomic_write_text",
    "chain_for",
    "check_resumable",
    "complete",
    "complete_json",
    "consistency_score",
    "create_provider",
    "discover_ollama",
    "load_config",
    "redact",
    "save_config",
    "select_provider",
    "strip_control",
    "to_json",
    "to_markdown",
    "__version__",
]
