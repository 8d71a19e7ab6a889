"""The public API of detektiv's engine, for type checkers and for the lazy loader alike:
each name is here once (`X as X`: the re-export form); `engine/__init__.py` reads this file
(lazy_loader) and imports a name's module on first use. A test holds the list to what the
front ends use, so it shrinks instead of growing."""

__version__: str

from .agent.events import (
    AgentAttempt as AgentAttempt,
    AgentDelta as AgentDelta,
    AgentEvent as AgentEvent,
    AgentNote as AgentNote,
    AgentStarted as AgentStarted,
    AgentStopped as AgentStopped,
    FallbackDecided as FallbackDecided,
    NodeChanged as NodeChanged,
    NoSignal as NoSignal,
    ReferenceResolved as ReferenceResolved,
    SignalInvalid as SignalInvalid,
    SignalParsed as SignalParsed,
    ToolCalled as ToolCalled,
    ToolFinished as ToolFinished,
    TurnEnded as TurnEnded,
    TurnStarted as TurnStarted,
    read_run as read_run,
)
from .agent.run import AgentRun as AgentRun
from .config.defaults import DEFAULT_THEME as DEFAULT_THEME
from .config.load import load_config as load_config
from .config.models import Config as Config
from .config.providers import (
    ProviderConfig as ProviderConfig,
    is_loopback as is_loopback,
)
from .config.roles import split_chain as split_chain
from .costs import Budget as Budget, cost_badge as cost_badge, money as money
from .errors import (
    EXIT_CODES as EXIT_CODES,
    AgentError as AgentError,
    AllProvidersFailed as AllProvidersFailed,
    AuthError as AuthError,
    BadResponseError as BadResponseError,
    ConfigError as ConfigError,
    ContextOverflowError as ContextOverflowError,
    DatasetError as DatasetError,
    DetektivError as DetektivError,
    FirstTokenTimeout as FirstTokenTimeout,
    InterrogationFailed as InterrogationFailed,
    ModelError as ModelError,
    NoteRefused as NoteRefused,
    OracleError as OracleError,
    ProviderConnectionError as ProviderConnectionError,
    ProviderError as ProviderError,
    ProviderTimeout as ProviderTimeout,
    PullBusy as PullBusy,
    RateLimitedError as RateLimitedError,
    RequestError as RequestError,
    ServerError as ServerError,
    SessionBusy as SessionBusy,
    SessionCorrupt as SessionCorrupt,
    SessionError as SessionError,
    SessionNotFound as SessionNotFound,
    StallTimeout as StallTimeout,
    TotalTimeout as TotalTimeout,
    UnusableReplyError as UnusableReplyError,
    exit_family as exit_family,
    session_exit_code as session_exit_code,
)
from .evals.board import (
    board_json as board_json,
    board_lines as board_lines,
    board_table as board_table,
)
from .evals.compare import Leaderboard as Leaderboard
from .evals.folder import EvalRunInfo as EvalRunInfo
from .evals.report import (
    ablation_table as ablation_table,
    eval_lines as eval_lines,
    eval_table as eval_table,
    fit_lines as fit_lines,
    reliability_lines as reliability_lines,
    summary_json as summary_json,
)
from .evals.run import (
    EvalFinished as EvalFinished,
    EvalItemDone as EvalItemDone,
    EvalRequest as EvalRequest,
    EvalStarted as EvalStarted,
)
from .evals.summary import EvalSummary as EvalSummary
from .gguf.capable import Cancelled as Cancelled, FetchProgress as FetchProgress
from .jsondata import read_json as read_json
from .lifeline import (
    Lifeline as Lifeline,
    hold_lifeline as hold_lifeline,
    release_tied as release_tied,
    spawn_tied as spawn_tied,
)
from .logs import (
    configure_logging as configure_logging,
    log_file as log_file,
    log_level as log_level,
)
from .models.event import Event as Event
from .models.events import (
    Advice as Advice,
    AnswerCutOff as AnswerCutOff,
    AnswerDelta as AnswerDelta,
    AnswerSampled as AnswerSampled,
    AnswerUnusable as AnswerUnusable,
    AuditReady as AuditReady,
    ClaimExamined as ClaimExamined,
    ClaimsSplit as ClaimsSplit,
    ContextFitted as ContextFitted,
    Discarded as Discarded,
    Finished as Finished,
    GapAnalysisReady as GapAnalysisReady,
    InterrogationEvent as InterrogationEvent,
    JudgementReady as JudgementReady,
    PairCompleted as PairCompleted,
    Phase as Phase,
    ProviderChosen as ProviderChosen,
    QuestionDelta as QuestionDelta,
    Reasoning as Reasoning,
    Record as Record,
    Started as Started,
    TrailAdded as TrailAdded,
    encode_record as encode_record,
)
from .models.notes import LlmEntry as LlmEntry, NoteEntry as NoteEntry
from .models.session import (
    PROTOCOLS as PROTOCOLS,
    SHOWN_STATUSES as SHOWN_STATUSES,
    AuditResult as AuditResult,
    GapAnalysis as GapAnalysis,
    Protocol as Protocol,
    QuestionAnswerPair as QuestionAnswerPair,
)
from .models.testimony import Claim as Claim
from .models.usage import TokenTally as TokenTally
from .oracles.catalog import Oracle as Oracle
from .oracles.consult import Consultation as Consultation
from .oracles.events import (
    OracleAttempt as OracleAttempt,
    OracleDelta as OracleDelta,
    OracleEvent as OracleEvent,
    OracleFailed as OracleFailed,
    OracleNote as OracleNote,
    OracleSaved as OracleSaved,
)
from .paths import Paths as Paths, resource_dir as resource_dir
from .providers._events import StreamRequest as StreamRequest
from .providers._lent import LentReply as LentReply
from .report.agent import (
    TagFilter as TagFilter,
    event_line as event_line,
    signal_line as signal_line,
    stop_lines as stop_lines,
)
from .report.blocks import (
    Append as Append,
    Block as Block,
    BlockKind as BlockKind,
    Narration as Narration,
    Piece as Piece,
    Void as Void,
    audit_lines as audit_lines,
    claim_round_blocks as claim_round_blocks,
    discarded_line as discarded_line,
    finished_line as finished_line,
    reasoning_title as reasoning_title,
)
from .report.cells import (
    EvalGroup as EvalGroup,
    grouped as grouped,
    listed_title as listed_title,
    rounds_cell as rounds_cell,
    verdict_cell as verdict_cell,
    verdict_short as verdict_short,
)
from .report.claims import (
    MARKS as MARKS,
    claim_line as claim_line,
    claim_row as claim_row,
    claims_tally as claims_tally,
    marked_parts as marked_parts,
    severest as severest,
)
from .report.words import (
    answer_title as answer_title,
    check_line as check_line,
    explanation_lines as explanation_lines,
    note_title as note_title,
    phase_status as phase_status,
    running_verdict as running_verdict,
    snapshot_line as snapshot_line,
)
from .routing.events import WAS_REASONING as WAS_REASONING
from .routing.structured import SchemaError as SchemaError, check_schema as check_schema
from .secrets import redact as redact
from .storage.atomic import atomic_write_text as atomic_write_text
from .storage.index import SessionSummary as SessionSummary, newest_sessions as newest_sessions
from .text import counted as counted, one_line as one_line, strip_control as strip_control
from .workspace.ask import (
    AskAnswered as AskAnswered,
    AskDelta as AskDelta,
    AskEvent as AskEvent,
    AskNote as AskNote,
)
from .workspace.core import Workspace as Workspace
from .workspace.models import model_row as model_row
from .workspace.sessions import (
    HYPOTHESIS_LIMIT as HYPOTHESIS_LIMIT,
    Run as Run,
    check_hypothesis as check_hypothesis,
)
