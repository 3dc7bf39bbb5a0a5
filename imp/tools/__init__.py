"""imp's tools: `Tool` values made with `tool`, and `run_tool_calls`, which runs one step's calls.

Each call ends with one outcome (`result`, `refused`, `auth_refused`, `not_sent`, `unknown`);
a failure is an observation for the model (`format_tool_result`), never a crash of the loop.
"""

from imp.history import ToolCall, ToolOutcome, ToolResult, format_tool_result
from imp.tools._threads import DEFAULT_TOOL_THREADS, tool_thread_limiter
from imp.tools.authorization import (
    DEFAULT_AUTHORIZE_TIMEOUT,
    Allow,
    AuthorizationRequest,
    Authorizer,
    Cancel,
    Decision,
    Deny,
    ask_authorizer,
)
from imp.tools.errors import ExecutionCancelled, ToolError
from imp.tools.events import EventHandler, ToolEvent, ToolEventKind, forward_tool_event
from imp.tools.policy import PolicyFunction, ToolPolicy, check_policy
from imp.tools.run import run_tool_calls
from imp.tools.schema import SchemaProblem, check_arguments, decode_arguments
from imp.tools.tool import RESERVED_TOOL_NAMES, CallWith, Tool, as_tool, tool

__all__ = [
    "DEFAULT_AUTHORIZE_TIMEOUT",
    "DEFAULT_TOOL_THREADS",
    "RESERVED_TOOL_NAMES",
    "Allow",
    "AuthorizationRequest",
    "Authorizer",
    "CallWith",
    "Cancel",
    "Decision",
    "Deny",
    "EventHandler",
    "ExecutionCancelled",
    "PolicyFunction",
    "SchemaProblem",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolEvent",
    "ToolEventKind",
    "ToolOutcome",
    "ToolPolicy",
    "ToolResult",
    "as_tool",
    "ask_authorizer",
    "check_arguments",
    "check_policy",
    "decode_arguments",
    "format_tool_result",
    "forward_tool_event",
    "run_tool_calls",
    "tool",
    "tool_thread_limiter",
]
