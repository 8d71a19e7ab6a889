"""The public API of detektiv's engine, for type checkers and for the lazy loader alike:
each name is here once (`X as X`: the re-export form); `engine/__init__.py` reads this file
(lazy_loader) and imports a name's module on first use. A test holds the list to what the
front ends use, so it shrinks instead of growing."""

__version__: str

from .agent.events import (
    AgentAttempt as AgentAttempt,
)
from .agent.events import (
    AgentDelta as AgentDelta,
)
from .agent.events import (
    AgentEvent as AgentEvent,
)
from .agent.events import (
    AgentNote as AgentNote,
)
from .agent.events import (
    AgentStarted as AgentStarted,
)
from .agent.events import (
    AgentStopped as AgentStopped,
)
from .agent.events import (
    FallbackDecided as FallbackDecided,
)
from .agent.events import (
    NodeChanged as NodeChanged,
)
from .agent.events import (
    NoSignal as NoSignal,
)
from .agent.events import (
    ReferenceResolved as ReferenceResolved,
)
from .agent.events import (
    SignalInvalid as SignalInvalid,
)
from .agent.events import (
    SignalParsed as SignalParsed,
)
from .agent.events import (
    ToolCalled as ToolCalled,
)
from .agent.events import (
    ToolFinished as ToolFinished,
)
from .agent.events import (
    TurnEnded as TurnEnded,
)
from .agent.events import (
    TurnStarted as TurnStarted,
)
from .agent.events import (
    read_run as read_run,
)
from .agent.run import AgentRun as AgentRun
from .config.models import (
    Config as Config,
)
from .config.models import (
    ProviderConfig as ProviderConfig,
)
from .config.models import (
    load_config as load_config,
)
from .errors import (
    AgentError as AgentError,
)
from .errors import (
    AllProvidersFailed as AllProvidersFailed,
)
from .errors import (
    AuthError as AuthError,
)
from .errors import (
    BadResponseError as BadResponseError,
)
from .errors import (
    ConfigError as ConfigError,
)
from .errors import (
    ContextOverflowError as ContextOverflowError,
)
from .errors import (
    DetektivError as DetektivError,
)
from .errors import (
    FirstTokenTimeout as FirstTokenTimeout,
)
from .errors import (
    InterrogationFailed as InterrogationFailed,
)
from .errors import (
    ModelError as ModelError,
)
from .errors import (
    NoteRefused as NoteRefused,
)
from .errors import (
    OracleError as OracleError,
)
from .errors import (
    ProviderConnectionError as ProviderConnectionError,
)
from .errors import (
    ProviderError as ProviderError,
)
from .errors import (
    ProviderTimeout as ProviderTimeout,
)
from .errors import (
    RateLimitedError as RateLimitedError,
)
from .errors import (
    RequestError as RequestError,
)
from .errors import (
    ServerError as ServerError,
)
from .errors import (
    SessionBusy as SessionBusy,
)
from .errors import (
    SessionCorrupt as SessionCorrupt,
)
from .errors import (
    SessionError as SessionError,
)
from .errors import (
    SessionNotFound as SessionNotFound,
)
from .errors import (
    StallTimeout as StallTimeout,
)
from .errors import (
    TotalTimeout as TotalTimeout,
)
from .errors import (
    UnusableReplyError as UnusableReplyError,
)
from .logs import configure_logging as configure_logging
from .logs import log_file as log_file
from .models.event import Event as Event
from .models.events import (
    Advice as Advice,
)
from .models.events import (
    AnswerCutOff as AnswerCutOff,
)
from .models.events import (
    AnswerDelta as AnswerDelta,
)
from .models.events import (
    AnswerUnusable as AnswerUnusable,
)
from .models.events import (
    AuditReady as AuditReady,
)
from .models.events import (
    ContextFitted as ContextFitted,
)
from .models.events import (
    Discarded as Discarded,
)
from .models.events import (
    Finished as Finished,
)
from .models.events import (
    GapAnalysisReady as GapAnalysisReady,
)
from .models.events import (
    InterrogationEvent as InterrogationEvent,
)
from .models.events import (
    PairCompleted as PairCompleted,
)
from .models.events import (
    Phase as Phase,
)
from .models.events import (
    ProviderChosen as ProviderChosen,
)
from .models.events import (
    QuestionDelta as QuestionDelta,
)
from .models.events import (
    Record as Record,
)
from .models.events import (
    Started as Started,
)
from .models.events import (
    TrailAdded as TrailAdded,
)
from .models.events import (
    encode_record as encode_record,
)
from .models.notes import LlmEntry as LlmEntry
from .models.notes import NoteEntry as NoteEntry
from .models.session import AuditResult as AuditResult
from .models.session import GapAnalysis as GapAnalysis
from .oracles.catalog import Oracle as Oracle
from .oracles.consult import Consultation as Consultation
from .oracles.events import (
    OracleAttempt as OracleAttempt,
)
from .oracles.events import (
    OracleDelta as OracleDelta,
)
from .oracles.events import (
    OracleEvent as OracleEvent,
)
from .oracles.events import (
    OracleFailed as OracleFailed,
)
from .oracles.events import (
    OracleNote as OracleNote,
)
from .oracles.events import (
    OracleSaved as OracleSaved,
)
from .paths import Paths as Paths
from .paths import resource_dir as resource_dir
from .report.agent import (
    TagFilter as TagFilter,
)
from .report.agent import (
    event_line as event_line,
)
from .report.agent import (
    signal_line as signal_line,
)
from .report.agent import (
    stop_lines as stop_lines,
)
from .report.blocks import (
    Append as Append,
)
from .report.blocks import (
    Block as Block,
)
from .report.blocks import (
    Narration as Narration,
)
from .report.blocks import (
    Piece as Piece,
)
from .report.blocks import (
    Void as Void,
)
from .report.blocks import (
    audit_lines as audit_lines,
)
from .report.blocks import (
    discarded_line as discarded_line,
)
from .report.blocks import (
    finished_line as finished_line,
)
from .report.words import (
    answer_title as answer_title,
)
from .report.words import (
    check_line as check_line,
)
from .report.words import (
    explanation_lines as explanation_lines,
)
from .report.words import (
    note_title as note_title,
)
from .report.words import (
    snapshot_line as snapshot_line,
)
from .report.words import (
    verdict_cell as verdict_cell,
)
from .report.words import (
    verdict_short as verdict_short,
)
from .routing.structured import SchemaError as SchemaError
from .routing.structured import check_schema as check_schema
from .secrets import redact as redact
from .storage.atomic import atomic_write_text as atomic_write_text
from .storage.index import SessionSummary as SessionSummary
from .text import strip_control as strip_control
from .workspace.ask import (
    AskAnswered as AskAnswered,
)
from .workspace.ask import (
    AskDelta as AskDelta,
)
from .workspace.ask import (
    AskEvent as AskEvent,
)
from .workspace.ask import (
    AskNote as AskNote,
)
from .workspace.core import Workspace as Workspace
from .workspace.models import model_row as model_row
from .workspace.sessions import Run as Run
