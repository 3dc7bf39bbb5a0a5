"""What both tool loops (`imp.react` and `imp.react_trajectory`) hold and check, declared once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Self

from imp.adapters.base import Adapter
from imp.models.base import LM
from imp.programs._parameters import ToolDescription, check_loop_demos
from imp.signature import Signature
from imp.tools import Tool, ToolPolicy, as_tool

__all__ = ["ToolLoop", "check_max_iters", "waits"]


def check_max_iters(value: object) -> None:
    """Refuse a `max_iters` that is not a whole number >= 0 (given to the program or to one call)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"max_iters is a whole number >= 0, got {value!r}")


def waits(roster: Mapping[str, Tool], name: str) -> bool:
    """Whether a call to this tool always waits for approval (`requires_approval`) instead of running
    now: neither loop reserves it in a budget until the resumed call runs it."""
    tool = roster.get(name)
    return tool is not None and tool.requires_approval


@dataclass(frozen=True, eq=False)
class ToolLoop:
    """What a program that runs a model and its tools step by step holds: mixed into `ReAct` and
    `ReActTrajectory` beside `Program`."""

    signature: Signature
    tools: tuple[Tool, ...]
    lm: LM | None = None
    adapter: Adapter | None = None
    demos: tuple[Mapping[str, Any], ...] = ()
    config: Mapping[str, Any] = field(default_factory=dict)
    """Request options sent with every step (`temperature`, `max_tokens`, ...)."""
    adapter_opts: Mapping[str, Any] = field(default_factory=dict)
    """Format options for the adapter (`agent_line`, the renderer seams, ...)."""
    max_iters: int = 20
    """The most step requests a turn makes before it is interrupted."""
    tool_policy: ToolPolicy = "allow"
    """Which calls run without asking (`allow`, `deny`, `ask`, or a function of the call)."""

    loop_tool: ClassVar[str]
    """The name of the loop's own tool (`submit`, `finish`), reserved."""
    label: ClassVar[str]
    """How errors name the program's factory (`imp.react`)."""
    zero_iters: ClassVar[str]
    """What a program built with `max_iters=0` is told to do instead (a call may give 0, a program not)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "tools", tuple(as_tool(t, self.label) for t in self.tools))
        object.__setattr__(self, "demos", tuple(self.demos))
        names = self.tool_names
        if len(set(names)) != len(names):
            raise ValueError(f"two tools share a name: {sorted({n for n in names if names.count(n) > 1})}")
        if self.loop_tool in names:
            raise ValueError(f"the tool name `{self.loop_tool}` is reserved for the loop's own tool")
        if not isinstance(self.adapter_opts, Mapping):
            raise TypeError(f"adapter_opts must be a mapping, got {type(self.adapter_opts).__name__}")
        if not isinstance(self.config, Mapping):
            raise TypeError(f"config must be a mapping of request options, got {type(self.config).__name__}")
        check_max_iters(self.max_iters)
        if self.max_iters == 0:
            raise ValueError(
                f"{self.label}(max_iters=0): max_iters is how many tool steps one call may take (>= 1, 20 by "
                f"default), so this program could never run a tool; {self.zero_iters}"
            )

    @property
    def tool_names(self) -> list[str]:
        """The names of the program's tools, in order."""
        return [t.name for t in self.tools]

    def tool_descriptions(self) -> tuple[ToolDescription, ...]:
        """What an optimizer may rewrite of each tool: its description and parameters."""
        return tuple(ToolDescription(t.name, t.description, t.parameters, t) for t in self.tools)

    def with_lm(self, lm: LM) -> Self:
        """The same loop pinned to another LM."""
        return replace(self, lm=lm)

    def with_tools(self, tools: Sequence[Tool]) -> Self:
        """The same loop with another roster."""
        return replace(self, tools=tuple(tools))

    def with_demos(self, demos: Sequence[Mapping[str, object]]) -> Self:
        """The same loop with these demos (signature-shaped examples)."""
        return replace(self, demos=check_loop_demos(demos))
