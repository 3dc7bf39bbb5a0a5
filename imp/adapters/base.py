"""Message assembly every dialect shares: system, demos, history turns, the request; and parsing's last step."""

from __future__ import annotations

import abc
import inspect
import re
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from imp.adapters._split import Splitter, WholeReply
from imp.errors import AdapterParseError, InvalidInputError
from imp.history import History, tool_result_content
from imp.prediction import Prediction
from imp.records import Message, Step, ToolResult, with_placed_media
from imp.signature import Field, Signature
from imp.values import CoercionError, coerce_text, coerce_value, load_json_object, render_value

__all__ = [
    "FORMAT_OPTIONS",
    "Adapter",
    "FormatOptions",
    "Guidance",
    "LMCapabilitiesLike",
    "LMLike",
    "message_name",
]

FORMAT_OPTIONS = frozenset(
    {
        "demos",
        "response_instruction",
        "guidance",
        "agent_line",
        "omit_empty_request",
        "output_renderer",
        "input_section_renderer",
        "system_renderer",
        "tool_result_renderer",
        "history_note_renderer",
    }
)
"""The options `Adapter.format` reads; any other key is ignored."""

DEFAULT_AGENT_LINE = "You are an Agent. Use the supplied tools to gather information and take actions."
INCOMPLETE_DEMO_PREFIX = "This is an example of the task, though some input or output fields are not supplied."
MISSING_IN_DEMO = "Not supplied for this particular example. "
MISSING_IN_HISTORY = "Not supplied for this conversation history message. "
_UNSET: Any = object()
_NAME_KEYS = ("user_name", "assistant_name")
MARKER_LINE = re.compile(r"\[\[ ## (\w+) ## \]\]")
"""A Chat field marker, `[[ ## name ## ]]`, at the start of a (stripped) line."""


@dataclass(frozen=True, slots=True)
class Guidance:
    """What a tool loop adds to the instructions (the `guidance` format option): its own lines, after
    the `agent_line`, and whether a reply may be plain text (`text_answer`: the system message then
    shows the inputs' layout only, as a text answer carries no output markers)."""

    lines: tuple[str, ...] = ()
    text_answer: bool = False


class LMCapabilitiesLike(Protocol):
    """What an adapter reads of an LM's capabilities: how much structured output it takes."""

    @property
    def response_format(self) -> str: ...


class LMLike(Protocol):
    """What an adapter reads of an LM (adapters sit below the models and never import them)."""

    @property
    def capabilities(self) -> LMCapabilitiesLike: ...


@dataclass(frozen=True, slots=True)
class FormatOptions:
    """The Chat format options (demos, guidance, the renderer seams), read once from a mapping (unknown keys ignored)."""

    demos: Sequence[Mapping[str, Any]] = ()
    response_instruction: bool = True
    guidance: Guidance | None = None
    agent_line: str | None = DEFAULT_AGENT_LINE
    omit_empty_request: bool = False
    output_renderer: Callable[..., str] | None = None
    input_section_renderer: Callable[[Field, str], str] | None = None
    system_renderer: Callable[[Signature, dict[str, Any]], str] | None = None
    tool_result_renderer: Callable[[ToolResult, dict[str, Any]], str] | None = None
    history_note_renderer: Callable[[Signature, Mapping[str, Any]], str | None] | None = None

    @classmethod
    def read(cls, options: Mapping[str, Any] | None) -> FormatOptions:
        """Read the known keys of a mapping; anything that is not a mapping is refused."""
        if options is None:
            return _DEFAULT_OPTIONS
        if not isinstance(options, Mapping):
            raise TypeError(f"adapter options must be a mapping, got {type(options).__name__}")
        known = {k: v for k, v in options.items() if k in FORMAT_OPTIONS}
        if not known:
            return _DEFAULT_OPTIONS
        if "demos" in known:
            if isinstance(known["demos"], str | bytes | Mapping):
                raise TypeError(f"demos is a list of mappings of fields, got {type(known['demos']).__name__}")
            known["demos"] = tuple(known["demos"] or ())
        if "guidance" in known and known["guidance"] is not None and not isinstance(known["guidance"], Guidance):
            raise TypeError(
                f"guidance is an imp.Guidance(lines=..., text_answer=...), got {type(known['guidance']).__name__}"
            )
        if "agent_line" in known and known["agent_line"] is not None and not isinstance(known["agent_line"], str):
            raise TypeError("agent_line is a string, or None to leave the line out")
        return cls(**known)

    def as_dict(self) -> dict[str, Any]:
        """The options as a plain dict, for renderers."""
        return {name: getattr(self, name) for name in FORMAT_OPTIONS}


_DEFAULT_OPTIONS = FormatOptions()


def message_name(value: object) -> str | None:
    """A participant name is used only when it is a non-empty string."""
    return value if isinstance(value, str) and value else None


def tries_fields(signature: Signature, text: str) -> bool:
    """Whether a reply tried to answer in fields: a marker line, an output's tag, or JSON with an output key."""
    if any(MARKER_LINE.match(line.strip()) for line in text.splitlines()):
        return True
    names = {*signature.outputs, *signature.metadata.get("answer_fields", ())}
    for name in names:
        if re.search(rf"<{re.escape(name)}(\s[^>]*)?>", text):
            return True
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        try:
            found = load_json_object(text[start : end + 1])
        except ValueError:
            return False
        return any(k in names for k in found)
    return False


def _arity(fn: Callable[..., object]) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 3
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return 4
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


class Adapter(abc.ABC):
    """Turns a signature plus inputs into chat messages, and a reply back into validated fields."""

    name: str = "Adapter"

    # --- dialect hooks -------------------------------------------------------------------

    @abc.abstractmethod
    def default_system(self, signature: Signature, options: Mapping[str, object]) -> str:
        """The system message this dialect writes."""

    @abc.abstractmethod
    def input_section(self, field: Field, formatted_value: str) -> str:
        """One input's section in a user message."""

    @abc.abstractmethod
    def default_outputs(self, signature: Signature, outputs: Mapping[str, object], missing_message: str) -> str:
        """An assistant message holding outputs (demos and history turns)."""

    @abc.abstractmethod
    def response_instruction(self, signature: Signature) -> str | None:
        """The reminder at the end of the request of how to answer, or None."""

    @abc.abstractmethod
    def parse_text(self, signature: Signature, text: str) -> dict[str, Any]:
        """Read completion text into output fields (coerced and completed)."""

    @property
    def fallback(self) -> Adapter | None:
        """The adapter asked once more when this one cannot parse a reply (None: no fallback)."""
        return None

    def request_options(self, signature: Signature, lm: LMLike | None) -> dict[str, Any]:
        """Request options this dialect adds for an LM (structured output); none by default."""
        return {}

    def field_section(self, name: str, text: str) -> str:
        """One field's value under this dialect's marker, as a user message shows it (`[[ ## name ## ]]`)."""
        return f"[[ ## {name} ## ]]\n{text}"

    def reply_text(self, signature: Signature, values: Mapping[str, object]) -> str:
        """Output values written the way this dialect asks the model to reply (a tool loop replays its steps so)."""
        return self.default_outputs(signature, values, MISSING_IN_HISTORY).strip()

    def field_splitter(self, signature: Signature) -> Splitter:
        """How a streamed reply is read field by field as it is written (`imp.stream`). A dialect that
        does not say gets `WholeReply`: its fields arrive whole, read by `parse_text`, when the reply ends."""
        return WholeReply(self.parse_text, signature)

    def value_form(self, field: Field) -> Literal["json", "tags"]:
        """How this dialect writes a structured output's value (a list, an object): as JSON, or as
        nested tags; a partial value (`imp.stream(..., partial=True)`) is read so as it streams."""
        return "json"

    def field_value(self, field: Field, text: str) -> Any:
        """One output's value from its streamed text (the joined deltas of its `field_splitter`), as
        this dialect reads it: a partial value's last word on that output (raises `CoercionError`)."""
        return coerce_text(field, text)

    def check(self, signature: Signature, demos: Sequence[Mapping[str, object]] = ()) -> None:  # noqa: B027 - optional hook
        """Refuse, when a program is built, a signature or demos this dialect cannot write and read back."""

    # --- formatting ----------------------------------------------------------------------

    def format(self, signature: Signature, inputs: Mapping[str, object], **options: object) -> list[Message]:
        """The messages for one request: system, demos, history turns, then the request."""
        return self.format_with(signature, inputs, FormatOptions.read(options))

    def format_with(self, signature: Signature, inputs: Mapping[str, Any], opts: FormatOptions) -> list[Message]:
        """`format` with options already read."""
        history_name = signature.history_field
        task = signature.without(history_name) if history_name else signature
        messages: list[Message] = [{"role": "system", "content": self.system_text(task, opts)}]
        if opts.demos:
            messages.extend(self.format_demos(task, opts.demos, opts))
        if history_name is not None:
            history = inputs.get(history_name)
            if history is not None:
                if not isinstance(history, History):
                    history = History(history)
                _check_turns(task, history, history_name)
                messages.extend(self.format_history(task, history, opts))
        if not opts.omit_empty_request or any(inputs.get(name) is not None for name in task.inputs):
            content = self.user_content(task, inputs, opts, main_request=True)
            message: Message = {"role": "user", "content": content}
            name = inputs.get("user_name")
            if name is not None and "user_name" not in signature.fields and message_name(name):
                message["name"] = name
            messages.append(message)
        return with_placed_media(messages)

    def system_text(self, signature: Signature, opts: FormatOptions) -> str:
        """The system message, through `system_renderer` when one is given."""
        if opts.system_renderer is None:
            return self.default_system(signature, opts.as_dict())
        render_opts = opts.as_dict()
        render_opts["default_system"] = self.default_system
        return opts.system_renderer(signature, render_opts)

    def render_section(self, field: Field, value: object, opts: FormatOptions) -> str:
        """One input section, through `input_section_renderer` when one is given."""
        formatted = render_value(value, field)
        if opts.input_section_renderer is not None:
            return opts.input_section_renderer(field, formatted)
        return self.input_section(field, formatted)

    def user_content(
        self,
        signature: Signature,
        values: Mapping[str, object],
        opts: FormatOptions,
        *,
        prefix: str = "",
        main_request: bool = False,
    ) -> str:
        """A user message: the inputs present, then (for the request) how to answer."""
        parts = [prefix] if prefix else []
        for name, field in signature.inputs.items():
            value = values.get(name)
            if value is not None:
                section = self.render_section(field, value, opts)
                if section:
                    parts.append(section)
        if main_request and opts.response_instruction:
            instruction = self.response_instruction(signature)
            if instruction:
                parts.append(instruction)
        return "\n\n".join(parts).strip()

    def render_outputs(
        self, signature: Signature, outputs: Mapping[str, object], missing_message: str, opts: FormatOptions
    ) -> str:
        """An assistant message with outputs, through `output_renderer` when one is given."""
        renderer = opts.output_renderer
        if renderer is None:
            return self.default_outputs(signature, outputs, missing_message)
        if _arity(renderer) >= 4:
            render_opts = opts.as_dict()
            render_opts["default_outputs"] = self.default_outputs
            return renderer(signature, outputs, missing_message, render_opts)
        return renderer(signature, outputs, missing_message)

    def format_demos(
        self, signature: Signature, demos: Sequence[Mapping[str, object]], opts: FormatOptions
    ) -> list[Message]:
        """Demos as user/assistant pairs: incomplete ones (marked) first, then complete ones."""
        complete: list[Mapping[str, Any]] = []
        incomplete: list[Mapping[str, Any]] = []
        for demo in demos:
            if all(k in demo and demo[k] is not None for k in signature.fields):
                complete.append(demo)
            elif any(k in demo for k in signature.inputs) and any(k in demo for k in signature.outputs):
                incomplete.append(demo)
        messages: list[Message] = []
        for demo in incomplete:
            messages.append(
                {"role": "user", "content": self.user_content(signature, demo, opts, prefix=INCOMPLETE_DEMO_PREFIX)}
            )
            outputs = {k: demo[k] for k in signature.outputs if k in demo}
            messages.append(
                {"role": "assistant", "content": self.render_outputs(signature, outputs, MISSING_IN_DEMO, opts)}
            )
        for demo in complete:
            messages.append({"role": "user", "content": self.user_content(signature, demo, opts)})
            outputs = {k: demo[k] for k in signature.outputs}
            messages.append(
                {"role": "assistant", "content": self.render_outputs(signature, outputs, MISSING_IN_HISTORY, opts)}
            )
        return messages

    def format_history(self, signature: Signature, history: History, opts: FormatOptions) -> list[Message]:
        """Each turn as earlier messages (tool-loop steps as native tool calls), each followed by its note."""
        messages: list[Message] = []
        for turn in history:
            if turn.is_tool_step:
                messages.extend(self.format_tool_turn(signature, turn, opts))
            else:
                messages.extend(self.format_field_turn(signature, turn, opts))
            if opts.history_note_renderer is not None:
                note = opts.history_note_renderer(signature, turn)
                if note:
                    messages.append({"role": "user", "content": note})
        return messages

    def _turn_request(self, signature: Signature, turn: Step, opts: FormatOptions) -> list[Message]:
        """A history turn's inputs as its user message (named by `user_name`), or nothing if it has none."""
        content = self.user_content(signature, turn, opts)
        if not content:
            return []
        user: Message = {"role": "user", "content": content}
        if "user_name" not in signature.fields and (name := message_name(turn.get("user_name"))):
            user["name"] = name
        return [user]

    def _named(self, signature: Signature, turn: Step, message: Message) -> Message:
        if "assistant_name" not in signature.fields and (name := message_name(turn.get("assistant_name"))):
            message["name"] = name
        return message

    def format_field_turn(self, signature: Signature, turn: Step, opts: FormatOptions) -> list[Message]:
        """A signature-shaped turn: its inputs as a user message, its outputs as the assistant's."""
        messages = self._turn_request(signature, turn, opts)
        outputs = {k: turn[k] for k in signature.outputs if k in turn}
        if outputs:
            text = self.render_outputs(signature, outputs, MISSING_IN_HISTORY, opts)
            messages.append(self._named(signature, turn, {"role": "assistant", "content": text}))
        return messages

    def format_tool_turn(self, signature: Signature, turn: Step, opts: FormatOptions) -> list[Message]:
        """A native tool step: inputs (if any), the assistant's thought and calls, one tool message per result."""
        messages = self._turn_request(signature, turn, opts)
        calls = turn.calls
        assistant: Message
        if calls:
            assistant = {
                "role": "assistant",
                "content": turn.thought or "",
                "tool_calls": list(calls),
            }
            if turn.reasoning_data is not None:
                assistant["reasoning_data"] = turn.reasoning_data
        elif turn.thought:
            assistant = {"role": "assistant", "content": turn.thought}
        else:
            outputs = {k: turn.fields[k] for k in signature.outputs if k in turn.fields}
            if not outputs:
                return messages
            assistant = {
                "role": "assistant",
                "content": self.render_outputs(signature, outputs, MISSING_IN_HISTORY, opts),
            }
        messages.append(self._named(signature, turn, assistant))
        results = {r.id: r for r in turn.result_list()}
        for call in calls:
            result = results.get(call.id)
            if result is None:
                continue
            if opts.tool_result_renderer is not None:
                text = opts.tool_result_renderer(result, {"id": call.id, "name": call.name})
            else:
                text = tool_result_content(result)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
        return messages

    # --- parsing -------------------------------------------------------------------------

    def parse(self, signature: Signature, completion: str | Mapping[str, object] | Prediction) -> dict[str, Any]:
        """The output fields of a reply (text, a mapping of fields, or a Prediction)."""
        if isinstance(completion, Prediction):
            return self.parse_mapping(signature, completion.fields)
        if isinstance(completion, Mapping):
            return self.parse_mapping(signature, completion)
        if not isinstance(completion, str):
            raise TypeError(f"a completion is text, a mapping or a Prediction, got {type(completion).__name__}")
        return self.parse_text(signature, completion)

    def text_field_reply(self, signature: Signature, text: str) -> dict[str, Any] | None:
        """The one exception to parsing by markers: a marker-free, non-blank reply fills `metadata["text_field"]`.

        The reply must not try to answer in fields in any dialect (a `[[ ## f ## ]]` line, an
        output's tag, a JSON object with an output's key); the other outputs take their defaults.
        None when the exception does not apply and the reply is parsed by the dialect's rules.
        """
        text_field = signature.metadata.get("text_field")
        if not isinstance(text_field, str) or text_field not in signature.outputs or not text.strip():
            return None
        if tries_fields(signature, text):
            return None
        return self.complete(signature, {text_field: text.strip()}, completion=text)

    def parse_mapping(self, signature: Signature, values: Mapping[str, object]) -> dict[str, Any]:
        """Coerce and complete a mapping of output fields."""
        present = {k: v for k, v in values.items() if k in signature.outputs}
        return self.complete(signature, present, completion=values, coerce=coerce_value)

    def complete(
        self,
        signature: Signature,
        found: Mapping[str, object],
        *,
        completion: str | Mapping[str, object],
        coerce: Callable[[Field, Any], Any] = coerce_text,
    ) -> dict[str, Any]:
        """Coerce each found value; fill absent outputs from defaults or None; refuse what is missing."""
        if not found:
            names = list(signature.outputs)
            raise AdapterParseError(
                "the reply has no output fields at all (expected " + ", ".join(f"`{n}`" for n in names) + ")",
                adapter=self.name,
                fields=names,
                completion=completion,
            )
        out: dict[str, Any] = {}
        missing: list[str] = []
        for name, field in signature.outputs.items():
            if name in found:
                try:
                    out[name] = coerce(field, found[name])
                except CoercionError as exc:
                    raise AdapterParseError(
                        str(exc),
                        adapter=self.name,
                        fields=[name],
                        completion=completion,
                        parsed=out,
                        value=exc.value,
                        reason=exc.reason,
                    ) from None
            elif field.has_default:
                out[name] = field.default
            elif field.optional:
                out[name] = None
            else:
                missing.append(name)
        if missing:
            raise AdapterParseError(
                "missing output field(s): " + ", ".join(f"`{n}`" for n in missing),
                adapter=self.name,
                fields=missing,
                completion=completion,
                parsed=out,
            )
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def objective(instructions: str) -> str:
    """DSPy's objective line: the instructions dedented, each line on its own indented line."""
    lines = textwrap.dedent(instructions).splitlines()
    return "In adhering to this structure, your objective is: " + ("\n" + " " * 8).join(["", *lines])


def loop_lines(guidance: Guidance | None, agent_line: str | None) -> list[str]:
    """A tool loop's lines for the instructions: the agent line, then the loop's own (none without guidance)."""
    if guidance is None:
        return []
    return [agent_line, *guidance.lines] if agent_line else list(guidance.lines)


_TURN_NAMES = frozenset({"user_name", "assistant_name"})


def _check_turns(signature: Signature, history: History, field: str) -> None:
    """Refuse a conversation turn that holds none of the signature's fields: it would send nothing,
    and the history would reach the model shorter than it was given (a misspelt key, or a history
    kept under another signature's names)."""
    for number, turn in enumerate(history, start=1):
        keys = [k for k in turn.fields if k not in _TURN_NAMES]
        if turn.is_tool_step or not keys or any(k in signature.fields for k in keys):
            continue
        raise InvalidInputError(
            field,
            f"turn {number} holds none of the signature's fields (its keys: {', '.join(sorted(keys))}); "
            f"a turn is a mapping of {', '.join(signature.fields)}",
            value=history,
        )
