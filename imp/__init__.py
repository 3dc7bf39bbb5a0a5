"""imp: an async-first runtime for language-model programs and tool-using agents."""

from typing import TYPE_CHECKING

from imp.adapters import (
    Adapter,
    ChatAdapter,
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
    DeadlineExceeded,
    ImpError,
    LMError,
    MissingInputError,
    ReActStepError,
    SignatureError,
)
from imp.history import History, ToolCall, ToolResult, format_tool_result
from imp.lm import LM, LMCapabilities, LMResponse, ScriptedLM, StaticLM, StreamEvent, Usage

if TYPE_CHECKING:
    from imp.evaluation import EvaluationError, EvaluationReport, Score, evaluate, exact_match, parallel
    from imp.saving import ChecksumError, LoadError, SaveError, load, save

from imp.lm._factory import lm
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
from imp.runtime.deadline import deadline
from imp.runtime.logging import configure_logging, reset_logging
from imp.runtime.run import Event, buffered_sink
from imp.runtime.trace import inspect_history
from imp.settings import Settings, configure, context, settings
from imp.signature import Field, InputField, OutputField, Signature, signature
from imp.tools import Allow, Cancel, Deny, ExecutionCancelled, Tool, ToolError, tool

__version__ = "0.1.0"


_LAZY = {
    "EvaluationError": "imp.evaluation",
    "EvaluationReport": "imp.evaluation",
    "Score": "imp.evaluation",
    "evaluate": "imp.evaluation",
    "exact_match": "imp.evaluation",
    "parallel": "imp.evaluation",
    "ChecksumError": "imp.saving",
    "LoadError": "imp.saving",
    "SaveError": "imp.saving",
    "load": "imp.saving",
    "save": "imp.saving",
}


def __getattr__(name: str) -> object:
    """Evaluation, saving and `imp.mcp` load on first use: `import imp` stays light, and the optional
    `mcp` extra is only needed by who uses it."""
    import importlib

    if name == "mcp":
        return importlib.import_module("imp.mcp")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'imp' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "buffered_sink",
    "reset_logging",
    "configure_logging",
    "format_tool_result",
    "ReActTrajectory",
    "react_trajectory",
    "lm",
    "save",
    "load",
    "SaveError",
    "LoadError",
    "ChecksumError",
    "Event",
    "parallel",
    "exact_match",
    "evaluate",
    "Score",
    "EvaluationReport",
    "EvaluationError",
    "CONTINUE",
    "LM",
    "Allow",
    "Cancel",
    "Deny",
    "ExecutionCancelled",
    "Finish",
    "ReAct",
    "Tool",
    "ToolError",
    "react",
    "tool",
    "Adapter",
    "AdapterParseError",
    "ChainOfThought",
    "ChatAdapter",
    "DeadlineExceeded",
    "Example",
    "Field",
    "History",
    "ImpError",
    "InputField",
    "JSONAdapter",
    "LMCapabilities",
    "LMError",
    "LMResponse",
    "MissingInputError",
    "OutputField",
    "Predict",
    "Prediction",
    "PredictionMetadata",
    "Program",
    "ReActStepError",
    "ScriptedLM",
    "Settings",
    "Signature",
    "SignatureError",
    "StaticLM",
    "StreamEvent",
    "ToolCall",
    "ToolResult",
    "Usage",
    "FunctionProgram",
    "TemplateAdapter",
    "TemplateError",
    "TemplateMessage",
    "XMLAdapter",
    "assistant",
    "call",
    "call_sync",
    "chain_of_thought",
    "configure",
    "context",
    "deadline",
    "fn",
    "inspect_history",
    "out",
    "predict",
    "settings",
    "signature",
    "system",
    "turns",
    "user",
]
