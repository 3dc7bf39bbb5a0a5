"""Step-down on refused request options: what one server refused, remembered for that LM value.

OpenAI-compatible servers differ in what they take. When a server refuses an option imp can do
without, the client steps down once, remembers it, logs one `lm_step_down` line, and resends:

- `response_format`: `json_schema` -> `json_object` -> none (the prompt still asks for JSON).
  llama.cpp's older server and llama-cpp-python take only `text`/`json_object`; LM Studio takes
  only `json_schema`/`text`, so a refused `json_object` goes straight to none.
- a named `tool_choice` -> `required` with only that tool offered (the same constraint, spelled
  the way servers that know only none/auto/required take it). A refused `required` or `auto`
  has no equivalent: it is raised as `ToolChoiceUnsupported` for the program to handle.
- `parallel_tool_calls` and `stream_options` (servers that predate them) are dropped.
- a stream the server cannot give: a streamed request with tools that ends before a single event
  (llama-cpp-python's `chatml-function-calling` raises "Automatic streaming tool choice is not
  supported" once the model chose a tool, after the 200 went out) or a refused `stream` -> the same
  request read whole (`stream_tool_calls`, or `streaming` when no tools were sent): the client then
  hands on the whole reply as deltas, and the caller of `stream` sees one clean stream.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal, cast

from imp.errors import ToolChoiceUnsupported, UnsupportedOption
from imp.models._wire import tool_choice_name

if TYPE_CHECKING:
    from imp.models._options import Options
    from imp.models._response import LMCapabilities, ResponseFormatSupport

__all__ = ["StepDown", "StepDowns"]

SteppedOption = Literal["response_format", "tool_choice", "parallel_tool_calls", "stream_options", "stream"]

_FORMAT_RANK: dict[str, int] = {"none": 0, "text": 0, "json_object": 1, "json_schema": 2}


@dataclass(frozen=True, slots=True)
class StepDown:
    """One step taken: which option, what was sent, and what is sent from now on."""

    option: SteppedOption
    sent: str
    now: str


@dataclass(slots=True)
class StepDowns:
    """The options one LM value's server refused, and how later requests are rewritten."""

    response_format: ResponseFormatSupport | None = None
    """The most structured output the server took after a refusal (None: nothing refused yet)."""
    named_tool_choice: bool = True
    dropped: set[str] = field(default_factory=set)
    """Options never sent again (`parallel_tool_calls`, `stream_options`)."""
    streaming: bool = True
    """False once the server refused a streamed request without tools: requests are read whole."""
    stream_tool_calls: bool = True
    """False once the server could not stream a request with tools: those are read whole."""

    def apply(self, options: Options) -> Options:
        """The options rewritten by what was refused before (the same mapping when nothing applies)."""
        if self.response_format is None and self.named_tool_choice and not self.dropped:
            return options
        out: dict[str, object] = dict(options)
        for name in self.dropped:
            out.pop(name, None)
        wanted = _format_type(out.get("response_format"))
        floor = self.response_format
        if floor is not None and wanted is not None and _FORMAT_RANK.get(wanted, 0) > _FORMAT_RANK[floor]:
            if floor == "json_object":
                out["response_format"] = {"type": "json_object"}
            else:
                out.pop("response_format")
        if not self.named_tool_choice:
            forced = _named_choice(out.get("tool_choice"))
            if forced is not None:
                out["tool_choice"] = "required"
                tools = out.get("tools")
                if isinstance(tools, list | tuple):
                    out["tools"] = [t for t in tools if _tool_name(t) == forced]
        return cast("Options", out)

    def step(self, error: UnsupportedOption, sent: Options) -> StepDown | bool:
        """Remember what `error` refused in the options `sent`: the step taken, True when an earlier
        step (another call's) already covers it and the request is worth resending, False when
        nothing can be stepped down."""
        option = error.option
        if option == "stream":
            return self._stream_step(bool(sent.get("tools")))
        if option == "response_format":
            wanted = _format_type(sent.get("response_format"))
            if wanted is None or _FORMAT_RANK.get(wanted, 0) == 0:
                return False
            below: ResponseFormatSupport = "json_object" if wanted == "json_schema" else "none"
            if self.response_format is not None and _FORMAT_RANK[self.response_format] <= _FORMAT_RANK[below]:
                return True
            self.response_format = below
            return StepDown("response_format", wanted, below)
        if option == "tool_choice" or isinstance(error, ToolChoiceUnsupported):
            if _named_choice(sent.get("tool_choice")) is None:
                return False
            if not self.named_tool_choice:
                return True
            self.named_tool_choice = False
            return StepDown("tool_choice", "named", "required with only the named tool")
        for droppable in ("parallel_tool_calls", "stream_options"):
            if option != droppable:
                continue
            if droppable in self.dropped:
                return True
            if droppable == "parallel_tool_calls" and "parallel_tool_calls" not in sent:
                return False  # (`stream_options` is the client's own, added to every stream)
            self.dropped.add(droppable)
            return StepDown(droppable, "sent", "left out")
        return False

    def _stream_step(self, tools: bool) -> StepDown | bool:
        if tools and self.stream_tool_calls:
            self.stream_tool_calls = False
            return StepDown("stream", "streamed with tools", "read whole when tools are sent")
        if not tools and self.streaming:
            self.streaming = False
            return StepDown("stream", "streamed", "read whole")
        return True  # another call stepped down already: this one is sent read whole

    def capabilities(self, declared: LMCapabilities) -> LMCapabilities:
        """`declared` lowered to what the server was seen to refuse."""
        lowered = declared
        if self.response_format is not None and (
            _FORMAT_RANK[declared.response_format] > _FORMAT_RANK[self.response_format]
        ):
            lowered = replace(lowered, response_format=self.response_format)
        if not self.named_tool_choice and declared.named_tool_choice:
            lowered = replace(lowered, named_tool_choice=False)
        if not self.streaming and declared.streaming:
            lowered = replace(lowered, streaming=False)
        if not self.stream_tool_calls and declared.stream_tool_calls:
            lowered = replace(lowered, stream_tool_calls=False)
        return lowered


def _format_type(value: object) -> str | None:
    if isinstance(value, Mapping) and isinstance(value.get("type"), str):
        return str(value["type"])
    return None


def _named_choice(choice: object) -> str | None:
    if choice is None:
        return None
    try:
        return tool_choice_name(choice)
    except ValueError:
        return None


def _tool_name(tool: object) -> str | None:
    if not isinstance(tool, Mapping):
        return None
    fn = tool.get("function")
    name = fn.get("name") if isinstance(fn, Mapping) else tool.get("name")
    return name if isinstance(name, str) else None
