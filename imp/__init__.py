"""imp: an async-first runtime for language-model programs and tool-using agents."""

from typing import TYPE_CHECKING

from imp._json import ParseLimits
from imp.adapters import (
    Adapter,
    ChatAdapter,
    Guidance,
    JSONAdapter,
    TemplateAdapter,
    TemplateError,
    TemplateMessage,
    XMLAdapter,
    assistant,
    system,
    turns,
    user,
)
from imp.errors import (
    AdapterParseError,
    AuthenticationError,
    BadRequest,
    ConnectionFailed,
    ContentFiltered,
    ContextWindowExceeded,
    DeadlineExceeded,
    ImpError,
    InvalidInputError,
    InvalidResponse,
    JournalBusy,
    JournalError,
    JournalMismatch,
    LMError,
    MediaRefused,
    MissingInputError,
    NotFound,
    ProviderUnavailable,
    QuotaExceeded,
    RateLimited,
    ReActStepError,
    ResponseTooLarge,
    ResumeError,
    Retry,
    SignatureError,
    StreamBroken,
    ToolChoiceUnsupported,
    UnsupportedOption,
    ValidationFailed,
)
from imp.history import History, Step, ToolCall, ToolResult, format_tool_result
from imp.media import Audio, File, Image
from imp.models import LM, LMCapabilities, LMResponse, ScriptedLM, StaticLM, StreamEvent, Usage
from imp.models._fallback import fallback, round_robin
from imp.models._tokens import TokenCount

if TYPE_CHECKING:
    from imp.durable import SQLiteJournal, SQLiteSessions
    from imp.evaluation import EvaluationError, EvaluationReport, Score, evaluate, exact_match, parallel
    from imp.observe.otel import instrument_otel
    from imp.observe.trace_html import trace_html
    from imp.optimize import GEPA, BootstrapFewShot, LabeledFewShot, OptimizationError, OptimizationResult
    from imp.saving import ChecksumError, LoadError, SaveError, load, save

from imp.exchanges import inspect_history
from imp.models._factory import lm
from imp.prediction import Example, Prediction, PredictionMetadata
from imp.programs import (
    CONTINUE,
    ChainOfThought,
    Finish,
    FunctionProgram,
    Predict,
    Program,
    ReAct,
    ReActTrajectory,
    call,
    call_sync,
    chain_of_thought,
    fn,
    out,
    predict,
    react,
    react_trajectory,
)
from imp.programs.function import FunctionError
from imp.programs.pending import Pending, PendingCall
from imp.programs.stream import StreamPart, stream
from imp.runtime.budget import Budget, BudgetExceeded
from imp.runtime.deadline import deadline
from imp.runtime.journal import idempotency_key
from imp.runtime.logging import configure_logging, reset_logging
from imp.runtime.run import Event, buffered_sink
from imp.settings import Settings, configure, context, settings
from imp.signature import Field, InputField, OutputField, Signature, signature
from imp.tools import Allow, Cancel, Defer, Deny, ExecutionCancelled, Tool, ToolError, tool

if TYPE_CHECKING:
    __version__: str
    """The installed distribution's version (its metadata, so it cannot drift from pyproject.toml)."""


_LAZY = {
    "instrument_otel": "imp.observe.otel",
    "trace_html": "imp.observe.trace_html",
    "EvaluationError": "imp.evaluation",
    "EvaluationReport": "imp.evaluation",
    "Score": "imp.evaluation",
    "evaluate": "imp.evaluation",
    "exact_match": "imp.evaluation",
    "parallel": "imp.evaluation",
    "BootstrapFewShot": "imp.optimize",
    "GEPA": "imp.optimize",
    "LabeledFewShot": "imp.optimize",
    "OptimizationError": "imp.optimize",
    "OptimizationResult": "imp.optimize",
    "ChecksumError": "imp.saving",
    "LoadError": "imp.saving",
    "SaveError": "imp.saving",
    "load": "imp.saving",
    "save": "imp.saving",
    "SQLiteJournal": "imp.durable",
    "SQLiteSessions": "imp.durable",
}


def __getattr__(name: str) -> object:
    """Evaluation, saving, `imp.mcp`, `imp.agui` and `imp.ray` load on first use: `import imp` stays
    light, and the optional `mcp`, `agui` and `ray` extras are only needed by who uses them."""
    import importlib

    if name == "__version__":  # read on first use: importlib.metadata costs `import imp` time
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("imp")
        except PackageNotFoundError:  # imported from a source tree that was never installed
            found = "0+unknown"
        globals()["__version__"] = found
        return found
    if name in ("mcp", "agui", "ray"):  # optional extras: importing them says which `pip install 'imp[...]'` they need
        return importlib.import_module(f"imp.{name}")
    if name == "dbos":
        return importlib.import_module("imp.durable.dbos")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'imp' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "Adapter",
    "AdapterParseError",
    "Allow",
    "Audio",
    "AuthenticationError",
    "BadRequest",
    "BootstrapFewShot",
    "Budget",
    "BudgetExceeded",
    "CONTINUE",
    "Cancel",
    "ChainOfThought",
    "ChatAdapter",
    "ChecksumError",
    "ConnectionFailed",
    "ContentFiltered",
    "ContextWindowExceeded",
    "DeadlineExceeded",
    "Defer",
    "Deny",
    "EvaluationError",
    "EvaluationReport",
    "Event",
    "Example",
    "ExecutionCancelled",
    "Field",
    "File",
    "Finish",
    "FunctionError",
    "FunctionProgram",
    "GEPA",
    "Guidance",
    "History",
    "Image",
    "ImpError",
    "InputField",
    "InvalidInputError",
    "InvalidResponse",
    "JSONAdapter",
    "JournalBusy",
    "JournalError",
    "JournalMismatch",
    "LM",
    "LMCapabilities",
    "LMError",
    "LMResponse",
    "LabeledFewShot",
    "LoadError",
    "MediaRefused",
    "MissingInputError",
    "NotFound",
    "OptimizationError",
    "OptimizationResult",
    "OutputField",
    "ParseLimits",
    "Pending",
    "PendingCall",
    "Predict",
    "Prediction",
    "PredictionMetadata",
    "Program",
    "ProviderUnavailable",
    "QuotaExceeded",
    "RateLimited",
    "ReAct",
    "ReActStepError",
    "ReActTrajectory",
    "ResponseTooLarge",
    "ResumeError",
    "Retry",
    "SQLiteJournal",
    "SQLiteSessions",
    "SaveError",
    "Score",
    "ScriptedLM",
    "Settings",
    "Signature",
    "SignatureError",
    "StaticLM",
    "Step",
    "StreamBroken",
    "StreamEvent",
    "StreamPart",
    "TemplateAdapter",
    "TemplateError",
    "TemplateMessage",
    "TokenCount",
    "Tool",
    "ToolCall",
    "ToolChoiceUnsupported",
    "ToolError",
    "ToolResult",
    "UnsupportedOption",
    "Usage",
    "ValidationFailed",
    "XMLAdapter",
    "assistant",
    "buffered_sink",
    "call",
    "call_sync",
    "chain_of_thought",
    "configure",
    "configure_logging",
    "context",
    "deadline",
    "evaluate",
    "exact_match",
    "fallback",
    "fn",
    "format_tool_result",
    "idempotency_key",
    "inspect_history",
    "instrument_otel",
    "lm",
    "load",
    "out",
    "parallel",
    "predict",
    "react",
    "react_trajectory",
    "reset_logging",
    "round_robin",
    "save",
    "settings",
    "signature",
    "stream",
    "system",
    "tool",
    "trace_html",
    "turns",
    "user",
]
