"""imp: an async-first runtime for language-model programs and tool-using agents."""

from imp.adapters import Adapter, ChatAdapter, JSONAdapter, XMLAdapter
from imp.errors import (
    AdapterParseError,
    DeadlineExceeded,
    ImpError,
    LMError,
    MissingInputError,
    ReActStepError,
    SignatureError,
)
from imp.evaluation import EvaluationError, EvaluationReport, Score, evaluate, exact_match, parallel
from imp.history import History, ToolCall, ToolResult
from imp.lm import LM, LMCapabilities, LMResponse, ScriptedLM, StaticLM, StreamEvent, Usage
from imp.lm._factory import lm
from imp.prediction import Example, Prediction, PredictionMetadata
from imp.programs import (
    CONTINUE,
    ChainOfThought,
    Finish,
    Predict,
    Program,
    ReAct,
    ReActTrajectory,
    call,
    call_sync,
    chain_of_thought,
    predict,
    react,
    react_trajectory,
)
from imp.runtime.deadline import deadline
from imp.runtime.run import Event
from imp.runtime.trace import inspect_history
from imp.saving import ChecksumError, LoadError, SaveError, load, save
from imp.settings import Settings, configure, context, settings
from imp.signature import Field, InputField, OutputField, Signature, signature
from imp.tools import Allow, Cancel, Deny, ExecutionCancelled, Tool, ToolError, tool

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """`imp.mcp` is imported on first use, so the optional `mcp` extra is only needed by who uses it."""
    if name == "mcp":
        import importlib

        return importlib.import_module("imp.mcp")
    raise AttributeError(f"module 'imp' has no attribute {name!r}")


__all__ = [
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
    "XMLAdapter",
    "call",
    "call_sync",
    "chain_of_thought",
    "configure",
    "context",
    "deadline",
    "inspect_history",
    "predict",
    "settings",
    "signature",
]
