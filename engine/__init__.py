"""detektiv's headless core. Never imports textual, rich or the tui package.

The public API is what `__all__` lists; everything else is private and may change. Names are
imported on first use, so `import engine` (and the app's first frame) pays only for what it
touches.

The names are written once, as the imports below (which type checkers read). At run time the
same block is read back from this file's source to know which module holds which name: a new
public name is one import line.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.agent.classify import (
        QueryClassification as QueryClassification,
    )
    from engine.agent.classify import (
        classify_query as classify_query,
    )
    from engine.agent.events import (
        STOP_REASONS as STOP_REASONS,
    )
    from engine.agent.events import (
        AgentAttempt as AgentAttempt,
    )
    from engine.agent.events import (
        AgentDelta as AgentDelta,
    )
    from engine.agent.events import (
        AgentEvent as AgentEvent,
    )
    from engine.agent.events import (
        AgentNote as AgentNote,
    )
    from engine.agent.events import (
        AgentStarted as AgentStarted,
    )
    from engine.agent.events import (
        AgentStopped as AgentStopped,
    )
    from engine.agent.events import (
        FallbackDecided as FallbackDecided,
    )
    from engine.agent.events import (
        NodeChanged as NodeChanged,
    )
    from engine.agent.events import (
        NoSignal as NoSignal,
    )
    from engine.agent.events import (
        ReferenceResolved as ReferenceResolved,
    )
    from engine.agent.events import (
        SignalInvalid as SignalInvalid,
    )
    from engine.agent.events import (
        SignalParsed as SignalParsed,
    )
    from engine.agent.events import (
        ToolCalled as ToolCalled,
    )
    from engine.agent.events import (
        ToolFinished as ToolFinished,
    )
    from engine.agent.events import (
        TurnEnded as TurnEnded,
    )
    from engine.agent.events import (
        TurnStarted as TurnStarted,
    )
    from engine.agent.events import (
        read_run as read_run,
    )
    from engine.agent.report import (
        TagFilter as TagFilter,
    )
    from engine.agent.report import (
        event_line as event_line,
    )
    from engine.agent.report import (
        signal_line as signal_line,
    )
    from engine.agent.report import (
        stop_lines as stop_lines,
    )
    from engine.agent.run import (
        AgentRun as AgentRun,
    )
    from engine.agent.signals import (
        ParsedSignal as ParsedSignal,
    )
    from engine.agent.signals import (
        Signal as Signal,
    )
    from engine.agent.signals import (
        parse_signal as parse_signal,
    )
    from engine.agent.vault import (
        Vault as Vault,
    )
    from engine.agent.vault import (
        VaultHit as VaultHit,
    )
    from engine.checks import (
        answer_problem as answer_problem,
    )
    from engine.checks import (
        may_close as may_close,
    )
    from engine.checks import (
        question_problem as question_problem,
    )
    from engine.config import (
        BUNDLED_MODEL as BUNDLED_MODEL,
    )
    from engine.config import (
        DEMONSTRATION_MODELS as DEMONSTRATION_MODELS,
    )
    from engine.config import (
        Config as Config,
    )
    from engine.config import (
        InterrogationConfig as InterrogationConfig,
    )
    from engine.config import (
        ProviderConfig as ProviderConfig,
    )
    from engine.config import (
        default_local_model as default_local_model,
    )
    from engine.config import (
        load_config as load_config,
    )
    from engine.config import (
        save_config as save_config,
    )
    from engine.context.budget import (
        FitReport as FitReport,
    )
    from engine.context.budget import (
        Prompt as Prompt,
    )
    from engine.context.budget import (
        Window as Window,
    )
    from engine.context.budget import (
        fit as fit,
    )
    from engine.context.budget import (
        window_of as window_of,
    )
    from engine.context.conversations import (
        ConversationInfo as ConversationInfo,
    )
    from engine.context.conversations import (
        ConversationStore as ConversationStore,
    )
    from engine.context.conversations import (
        ConversationTurn as ConversationTurn,
    )
    from engine.context.conversations import (
        MemoryConversations as MemoryConversations,
    )
    from engine.context.conversations import (
        SQLiteConversations as SQLiteConversations,
    )
    from engine.context.conversations import (
        conversation_prompt as conversation_prompt,
    )
    from engine.context.conversations import (
        load_recent as load_recent,
    )
    from engine.context.conversations import (
        select_recent as select_recent,
    )
    from engine.context.fit import (
        DoesNotFit as DoesNotFit,
    )
    from engine.context.fit import (
        Trim as Trim,
    )
    from engine.context.policy import (
        ContextPolicy as ContextPolicy,
    )
    from engine.context.policy import (
        Limits as Limits,
    )
    from engine.context.policy import (
        load_policy as load_policy,
    )
    from engine.context.reference import (
        LastReference as LastReference,
    )
    from engine.context.reference import (
        Mention as Mention,
    )
    from engine.context.reference import (
        Resolution as Resolution,
    )
    from engine.context.reference import (
        find_mentions as find_mentions,
    )
    from engine.context.reference import (
        remember as remember,
    )
    from engine.context.reference import (
        resolve_reference as resolve_reference,
    )
    from engine.context.tokens import (
        estimate as estimate,
    )
    from engine.context.tokens import (
        estimate_messages as estimate_messages,
    )
    from engine.errors import (
        AgentError as AgentError,
    )
    from engine.errors import (
        AllProvidersFailed as AllProvidersFailed,
    )
    from engine.errors import (
        AuthError as AuthError,
    )
    from engine.errors import (
        BadResponseError as BadResponseError,
    )
    from engine.errors import (
        ConfigError as ConfigError,
    )
    from engine.errors import (
        ContextOverflowError as ContextOverflowError,
    )
    from engine.errors import (
        DetektivError as DetektivError,
    )
    from engine.errors import (
        FirstTokenTimeout as FirstTokenTimeout,
    )
    from engine.errors import (
        InterrogationFailed as InterrogationFailed,
    )
    from engine.errors import (
        ModelError as ModelError,
    )
    from engine.errors import (
        NoteRefused as NoteRefused,
    )
    from engine.errors import (
        OracleError as OracleError,
    )
    from engine.errors import (
        ProviderConnectionError as ProviderConnectionError,
    )
    from engine.errors import (
        ProviderError as ProviderError,
    )
    from engine.errors import (
        ProviderTimeout as ProviderTimeout,
    )
    from engine.errors import (
        RateLimitedError as RateLimitedError,
    )
    from engine.errors import (
        RequestError as RequestError,
    )
    from engine.errors import (
        ServerError as ServerError,
    )
    from engine.errors import (
        SessionBusy as SessionBusy,
    )
    from engine.errors import (
        SessionCorrupt as SessionCorrupt,
    )
    from engine.errors import (
        SessionError as SessionError,
    )
    from engine.errors import (
        SessionNotFound as SessionNotFound,
    )
    from engine.errors import (
        StallTimeout as StallTimeout,
    )
    from engine.errors import (
        TotalTimeout as TotalTimeout,
    )
    from engine.errors import (
        UnusableReplyError as UnusableReplyError,
    )
    from engine.export import (
        to_json as to_json,
    )
    from engine.export import (
        to_markdown as to_markdown,
    )
    from engine.gguf.models import (
        LocalModels as LocalModels,
    )
    from engine.gguf.models import (
        model_row as model_row,
    )
    from engine.gguf.store import (
        resolve_model_path as resolve_model_path,
    )
    from engine.interrogation import (
        Interrogation as Interrogation,
    )
    from engine.logs import (
        configure_logging as configure_logging,
    )
    from engine.logs import (
        log_file as log_file,
    )
    from engine.models.events import (
        Advice as Advice,
    )
    from engine.models.events import (
        AnswerCutOff as AnswerCutOff,
    )
    from engine.models.events import (
        AnswerDelta as AnswerDelta,
    )
    from engine.models.events import (
        AnswerUnusable as AnswerUnusable,
    )
    from engine.models.events import (
        AuditReady as AuditReady,
    )
    from engine.models.events import (
        ContextFitted as ContextFitted,
    )
    from engine.models.events import (
        Discarded as Discarded,
    )
    from engine.models.events import (
        Finished as Finished,
    )
    from engine.models.events import (
        GapAnalysisReady as GapAnalysisReady,
    )
    from engine.models.events import (
        InterrogationEvent as InterrogationEvent,
    )
    from engine.models.events import (
        PairCompleted as PairCompleted,
    )
    from engine.models.events import (
        Phase as Phase,
    )
    from engine.models.events import (
        ProviderChosen as ProviderChosen,
    )
    from engine.models.events import (
        QuestionDelta as QuestionDelta,
    )
    from engine.models.events import (
        Record as Record,
    )
    from engine.models.events import (
        Started as Started,
    )
    from engine.models.events import (
        TrailAdded as TrailAdded,
    )
    from engine.models.events import (
        encode_record as encode_record,
    )
    from engine.models.notes import (
        ContextSnapshot as ContextSnapshot,
    )
    from engine.models.notes import (
        LlmEntry as LlmEntry,
    )
    from engine.models.notes import (
        NoteEntry as NoteEntry,
    )
    from engine.models.session import (
        ANSWER_CUT_OFF as ANSWER_CUT_OFF,
    )
    from engine.models.session import (
        AuditResult as AuditResult,
    )
    from engine.models.session import (
        AuditTrailEntry as AuditTrailEntry,
    )
    from engine.models.session import (
        ContextFit as ContextFit,
    )
    from engine.models.session import (
        Contradiction as Contradiction,
    )
    from engine.models.session import (
        Gap as Gap,
    )
    from engine.models.session import (
        GapAnalysis as GapAnalysis,
    )
    from engine.models.session import (
        Hypothesis as Hypothesis,
    )
    from engine.models.session import (
        InterrogationSession as InterrogationSession,
    )
    from engine.models.session import (
        QuestionAnswerPair as QuestionAnswerPair,
    )
    from engine.models.session import (
        check_resumable as check_resumable,
    )
    from engine.models.session import (
        consistency_score as consistency_score,
    )
    from engine.oracles.catalog import (
        Oracle as Oracle,
    )
    from engine.oracles.catalog import (
        OracleCatalog as OracleCatalog,
    )
    from engine.oracles.consult import (
        Consultation as Consultation,
    )
    from engine.oracles.consult import (
        OracleAttempt as OracleAttempt,
    )
    from engine.oracles.consult import (
        OracleDelta as OracleDelta,
    )
    from engine.oracles.consult import (
        OracleEvent as OracleEvent,
    )
    from engine.oracles.consult import (
        OracleFailed as OracleFailed,
    )
    from engine.oracles.consult import (
        OracleNote as OracleNote,
    )
    from engine.oracles.consult import (
        OracleSaved as OracleSaved,
    )
    from engine.oracles.consult import (
        Preview as Preview,
    )
    from engine.oracles.consult import (
        PreviewPart as PreviewPart,
    )
    from engine.oracles.notes import (
        NOTE_TYPES as NOTE_TYPES,
    )
    from engine.paths import (
        Paths as Paths,
    )
    from engine.paths import (
        resource_dir as resource_dir,
    )
    from engine.providers import (
        Done as Done,
    )
    from engine.providers import (
        Health as Health,
    )
    from engine.providers import (
        LlamaEngine as LlamaEngine,
    )
    from engine.providers import (
        LlamaOptions as LlamaOptions,
    )
    from engine.providers import (
        Message as Message,
    )
    from engine.providers import (
        Provider as Provider,
    )
    from engine.providers import (
        StreamEvent as StreamEvent,
    )
    from engine.providers import (
        StreamRequest as StreamRequest,
    )
    from engine.providers import (
        TokenDelta as TokenDelta,
    )
    from engine.providers import (
        Usage as Usage,
    )
    from engine.providers import (
        create_provider as create_provider,
    )
    from engine.providers import (
        discover_ollama as discover_ollama,
    )
    from engine.providers import (
        select_provider as select_provider,
    )
    from engine.report import (
        CAPABLE_MODEL_HINT as CAPABLE_MODEL_HINT,
    )
    from engine.report import (
        NO_ANSWER as NO_ANSWER,
    )
    from engine.report import (
        answer_title as answer_title,
    )
    from engine.report import (
        check_line as check_line,
    )
    from engine.report import (
        completeness as completeness,
    )
    from engine.report import (
        context_summary as context_summary,
    )
    from engine.report import (
        contradiction as contradiction,
    )
    from engine.report import (
        demonstration_note as demonstration_note,
    )
    from engine.report import (
        explanation_lines as explanation_lines,
    )
    from engine.report import (
        fit_line as fit_line,
    )
    from engine.report import (
        follow_up as follow_up,
    )
    from engine.report import (
        history_note as history_note,
    )
    from engine.report import (
        in_transcript as in_transcript,
    )
    from engine.report import (
        note as note,
    )
    from engine.report import (
        note_title as note_title,
    )
    from engine.report import (
        round_title as round_title,
    )
    from engine.report import (
        snapshot_line as snapshot_line,
    )
    from engine.report import (
        trail_line as trail_line,
    )
    from engine.report import (
        verdict_cell as verdict_cell,
    )
    from engine.report import (
        verdict_line as verdict_line,
    )
    from engine.report import (
        verdict_short as verdict_short,
    )
    from engine.roles import (
        apply_roles as apply_roles,
    )
    from engine.router import (
        Attempt as Attempt,
    )
    from engine.router import (
        Fitted as Fitted,
    )
    from engine.router import (
        PartialDiscarded as PartialDiscarded,
    )
    from engine.router import (
        ProviderEvent as ProviderEvent,
    )
    from engine.router import (
        RoutedCompletion as RoutedCompletion,
    )
    from engine.router import (
        Router as Router,
    )
    from engine.router import (
        RouterEvent as RouterEvent,
    )
    from engine.router import (
        chain_for as chain_for,
    )
    from engine.secrets import (
        redact as redact,
    )
    from engine.storage.atomic import (
        atomic_write_text as atomic_write_text,
    )
    from engine.storage.index import (
        SessionSummary as SessionSummary,
    )
    from engine.storage.sessions import (
        SessionJournal as SessionJournal,
    )
    from engine.storage.sessions import (
        SessionStore as SessionStore,
    )
    from engine.structured import (
        Completion as Completion,
    )
    from engine.structured import (
        SchemaError as SchemaError,
    )
    from engine.structured import (
        check_schema as check_schema,
    )
    from engine.structured import (
        complete as complete,
    )
    from engine.structured import (
        complete_json as complete_json,
    )
    from engine.text import (
        strip_control as strip_control,
    )
    from engine.workspace import (
        Asked as Asked,
    )
    from engine.workspace import (
        Run as Run,
    )
    from engine.workspace import (
        Workspace as Workspace,
    )


def _exports() -> dict[str, str]:
    """Name → module, read back from the `if TYPE_CHECKING:` imports of this file (each name
    imported `as` itself, which marks it re-exported); a plain scan, no parser to import."""
    found: dict[str, str] = {}
    with open(__file__, encoding="utf-8") as source:
        block = source.read().split("if TYPE_CHECKING:\n", 1)[1].split("\n\n", 1)[0]
    words = block.replace("(", " ").replace(")", " ").replace(",", " ").split()
    module = ""
    for word, following in zip(words, words[1:], strict=False):
        if word == "from":
            module = following
        elif word == "as":
            found[following] = module
    return found


_LAZY = _exports()

__version__ = "0.1.0"

__all__ = sorted([*_LAZY, "__version__"])


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
