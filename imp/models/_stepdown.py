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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from imp.errors import ToolChoiceUnsupported, UnsupportedOption
from imp.models._wire import tool_choice_name

if TYPE_CHECKING:
    from imp.models.base import LMCapabilities, ResponseFormatSupport

__all__ = ["StepDown", "StepDowns"]

SteppedOption = Literal["response_format", "tool_choice", "parallel_tool_calls", "stream_options"]

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

    def apply(self, options: Mapping[str, Any]) -> Mapping[str, Any]:
        """The options rewritten by what was refused before (the same mapping when nothing applies)."""
        if self.response_format is None and self.named_tool_choice and not self.dropped:
            return options
        out = dict(options)
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
                if isinstance(out.get("tools"), list | tuple):
                    out["tools"] = [t for t in out["tools"] if _tool_name(t) == forced]
        return out

    def step(self, error: UnsupportedOption, sent: Mapping[str, Any]) -> StepDown | bool:
        """Remember what `error` refused in the options `sent`: the step taken, True when an earlier
        step (another call's) already covers it and the request is worth resending, False when
        nothing can be stepped down."""
        option = error.option
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
            if droppable == "parallel_tool_calls" and droppable not in sent:
                return False  # (`stream_options` is the client's own, added to every stream)
            self.dropped.add(droppable)
            return StepDown(droppable, "sent", "left out")
        return False

    def capabilities(self, declared: LMCapabilities) -> LMCapabilities:
        """`declared` lowered to what the server was seen to refuse."""
        changes: dict[str, Any] = {}
        if self.response_format is not None and (
            _FORMAT_RANK[declared.response_format] > _FORMAT_RANK[self.response_format]
        ):
            changes["response_format"] = self.response_format
        if not self.named_tool_choice and declared.named_tool_choice:
            changes["named_tool_choice"] = False
        return replace(declared, **changes) if changes else declared


def _format_type(value: Any) -> str | None:
    if isinstance(value, Mapping) and isinstance(value.get("type"), str):
        return str(value["type"])
    return None


def _named_choice(choice: Any) -> str | None:
    if choice is None:
        return None
    try:
        return tool_choice_name(choice)
    except ValueError:
        return None


def _tool_name(tool: Any) -> str | None:
    if not isinstance(tool, Mapping):
        return None
    fn = tool.get("function")
    name = fn.get("name") if isinstance(fn, Mapping) else tool.get("name")
    return name if isinstance(name, str) else None
