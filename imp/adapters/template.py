"""The template adapter: the user writes the messages; the same reply form is shown and parsed."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from imp.adapters._registry import register_adapter
from imp.adapters._split import JSONSplitter, Splitter, prefilled, with_plain_text
from imp.adapters._template_bind import attribute, has_value, line_span, specialize, truth_of_field, uses_value
from imp.adapters._template_form import SLOT, Form, form_splitter, placeholder, split_slots
from imp.adapters._template_items import (
    Role,
    TemplateItem,
    TemplateMessage,
    Turns,
    as_item,
    assistant,
    system,
    turns,
    user,
)
from imp.adapters._template_text import (
    FIELD_ATTRIBUTES,
    For,
    If,
    Node,
    TemplateError,
    Text,
    Value,
    parse_template,
    render,
    walk,
)
from imp.adapters.base import DEFAULT_AGENT_LINE, Adapter, FormatOptions, Guidance, LMLike, loop_lines, message_name
from imp.adapters.json import JSONAdapter
from imp.errors import AdapterParseError
from imp.records import Message, with_placed_media
from imp.signature import Field, Signature
from imp.values import render_value

__all__ = [
    "TemplateAdapter",
    "TemplateError",
    "TemplateMessage",
    "Turns",
    "assistant",
    "system",
    "turns",
    "user",
]

_CACHE_SIZE = 256


@dataclass(frozen=True, slots=True)
class _Part:
    """A parsed template message."""

    role: Role
    nodes: tuple[Node, ...]
    where: str
    index: int


@dataclass(frozen=True, slots=True)
class _Bound:
    """A template checked against one signature: its reply form (None: the whole reply is the one output),
    each message with its loops over fields already expanded, and the plain `{instruction}`."""

    form: Form | None
    nodes: tuple[tuple[Node, ...], ...] = ()
    instruction: str = ""
    system: str | None = None
    """The system text when it depends on no input (and the loop adds no guidance)."""


class TemplateAdapter(Adapter):
    """Requests as the template's messages; the reply read by the form the template spells."""

    name = "TemplateAdapter"

    def __init__(self, template: Sequence[TemplateItem]) -> None:
        given: object = template
        if isinstance(given, str | bytes) or not isinstance(given, Sequence):
            raise TemplateError("a template is a list of messages: [imp.system(...), imp.turns(), imp.user(...)]")
        items = [as_item(x, i) for i, x in enumerate(template)]
        marks = [i for i, x in enumerate(items) if isinstance(x, Turns)]
        if len(marks) > 1:
            raise TemplateError("a template has at most one imp.turns()")
        messages = [x for x in items if isinstance(x, TemplateMessage)]
        users = [i for i, x in enumerate(items) if isinstance(x, TemplateMessage) and x.role == "user"]
        if not users:
            raise TemplateError("a template needs a user message (the request): add imp.user('...{input}...')")
        self._template: tuple[TemplateMessage | Turns, ...] = tuple(items)
        self._prefill: str | None = None
        end = len(items)
        if isinstance(items[-1], TemplateMessage) and items[-1].role == "assistant":
            nodes = parse_template(items[-1].content, f"template message {end - 1}")
            if any(not isinstance(n, Text) for n in nodes) or not items[-1].content:
                raise TemplateError(
                    f"template message {end - 1}: a last assistant message is a prefill, the literal start of "
                    "the reply; it cannot hold values or blocks"
                )
            self._prefill = items[-1].content
            end -= 1
        split = marks[0] + 1 if marks else users[-1]
        if marks and not any(i > marks[0] for i in users):
            raise TemplateError("imp.turns() goes before the request's user message, not after it")
        head = [i for i in range(0, marks[0] if marks else split) if isinstance(items[i], TemplateMessage)]
        request = [i for i in range(split, end) if isinstance(items[i], TemplateMessage)]
        self._head = tuple(self._part(items[i], i) for i in head)
        self._request = tuple(self._part(items[i], i) for i in request)
        self._last_user = max(i for i, p in enumerate(self._request) if p.role == "user")
        if any(p.role == "system" for p in self._request):
            raise TemplateError("system messages go before imp.turns() and the request")
        self._messages = messages
        self._bound: OrderedDict[Signature, _Bound] = OrderedDict()
        self._json: TemplateJSONAdapter | None = None
        self._last: tuple[Signature, _Bound] | None = None

    @staticmethod
    def _part(message: TemplateMessage | Turns, index: int) -> _Part:
        assert isinstance(message, TemplateMessage)
        where = f"template message {index} ({message.role})"
        return _Part(message.role, parse_template(message.content, where), where, index)

    @property
    def template(self) -> tuple[TemplateMessage | Turns, ...]:
        """The template's messages and its `turns()` mark, as given."""
        return self._template

    def dump(self) -> list[dict[str, str]]:
        """The template as OpenAI-style dicts (`{"role": "turns"}` for the mark), for saving."""
        return [
            {"role": "turns"} if isinstance(x, Turns) else {"role": x.role, "content": x.content}
            for x in self._template
        ]

    @classmethod
    def load(cls, data: Sequence[Mapping[str, object]]) -> TemplateAdapter:
        """A template adapter from `dump()` output."""
        return cls([turns() if dict(x) == {"role": "turns"} else x for x in data])

    def __repr__(self) -> str:
        return f"{type(self).__name__}([{', '.join(map(repr, self._template))}])"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and isinstance(other, TemplateAdapter) and other._template == self._template

    def __hash__(self) -> int:
        return hash(self._template)

    # --- checking a template against a signature -----------------------------------------

    def check(self, signature: Signature, demos: Sequence[Mapping[str, object]] = ()) -> None:
        """Refuse a template that names what the signature lacks, whose replies could not be read back,
        or a demo that could not be written unambiguously."""
        task = signature.without(signature.history_field) if signature.history_field else signature
        self._bind(task)
        self.check_demos(task, demos)

    def _bind(self, signature: Signature) -> _Bound:
        last = self._last
        if last is not None and last[0] is signature:  # the usual call: the same program's signature again
            return last[1]
        bound = self._bound.get(signature)
        if bound is not None:
            self._last = (signature, bound)
        if bound is not None:
            return bound
        bound = self._check(signature)
        self._bound[signature] = bound
        if len(self._bound) > _CACHE_SIZE:
            self._bound.popitem(last=False)
        return bound

    def _check(self, signature: Signature) -> _Bound:
        history = signature.history_field
        inputs = [n for n in signature.inputs if n != history]
        forms: list[tuple[_Part, tuple[Node, ...], bool]] = []
        for part in (*self._head, *self._request):
            for node, loops in walk(part.nodes):
                if isinstance(node, If):
                    self._check_name(node.test, loops, signature, inputs, part.where, test=True)
                elif isinstance(node, Value):
                    self._check_name(node, loops, signature, inputs, part.where)
                    if node.name in signature.outputs and node.attribute is None and loops:
                        raise TemplateError(f"{part.where}: `{{{node.name}}}` of an output goes outside loops")
                elif isinstance(node, For) and node.fields == "outputs" and uses_value(node):
                    if loops:
                        raise TemplateError(f"{part.where}: the reply form's loop cannot sit inside another loop")
                    forms.append((part, (node,), True))
            inline = [i for i, n in enumerate(part.nodes) if isinstance(n, Value) and n.name in signature.outputs]
            if inline:
                forms.append((part, line_span(part.nodes, inline[0], inline[-1]), False))
            for node, _loops in walk(part.nodes):
                if isinstance(node, If) and any(
                    isinstance(n, Value) and n.name in signature.outputs for n, _ in walk(node.body + node.orelse)
                ):
                    raise TemplateError(f"{part.where}: an output's value cannot sit inside `{{% if %}}`")
        if len(forms) > 1:
            raise TemplateError(
                f"{forms[1][0].where}: the template spells the reply form twice; write it once "
                "(loops over outputs that only show {f.name}, {f.desc} or {f.type} are fine)"
            )
        outputs = list(signature.outputs.values())
        if not forms:
            if len(outputs) != 1:
                raise TemplateError(
                    f"the template has no reply form, and the signature has {len(outputs)} outputs "
                    f"({', '.join(f'`{f.name}`' for f in outputs)}): with several outputs, spell the form in the "
                    "template, e.g. `{% for f in outputs %}{f.name}: {f.value}\\n{% endfor %}`"
                )
            return self._bound_with(signature, None)
        part, nodes, _ = forms[0]
        for node, _loops in walk(nodes):
            if isinstance(node, Value | If):
                value = node.test if isinstance(node, If) else node
                if value.name in inputs or value.name == "instruction":
                    raise TemplateError(f"{part.where}: the reply form cannot show `{value.name}` (it is read back)")
        index = {f.name: i for i, f in enumerate(outputs)}

        def lookup(value: Value, scope: dict[str, object]) -> str:
            field = scope.get(value.name)
            if isinstance(field, Field):
                if value.attribute == "value":
                    return SLOT.format(index[field.name])
                return attribute(field, value.attribute)
            return SLOT.format(index[value.name])

        expanded = render(nodes, lookup, lambda v, s: truth_of_field(v, s), lambda kind: outputs)
        return self._bound_with(signature, Form.build(split_slots(expanded, outputs), signature.outputs, part.where))

    def _source(self, part: _Part, signature: Signature) -> tuple[Node, ...]:
        """The nodes a message is rendered from (the JSON fallback replaces the reply form in them)."""
        return part.nodes

    def _bound_with(self, signature: Signature, form: Form | None) -> _Bound:
        parts = sorted((*self._head, *self._request), key=lambda p: p.index)
        nodes: list[tuple[Node, ...]] = [()] * (max(p.index for p in parts) + 1)
        for part in parts:
            nodes[part.index] = specialize(self._source(part, signature), signature)
        instruction = self.instruction(signature)
        system: str | None = None
        heads = [nodes[p.index] for p in self._head if p.role == "system"]
        if all(isinstance(n, Text) or (isinstance(n, Value) and n.name == "instruction") for h in heads for n in h):
            texts = ["".join(n.text if isinstance(n, Text) else instruction for n in h) for h in heads]
            system = "\n\n".join(t for t in texts if t)
        return _Bound(form, tuple(nodes), instruction, system)

    @staticmethod
    def _check_name(
        value: Value, loops: tuple[For, ...], signature: Signature, inputs: list[str], where: str, test: bool = False
    ) -> None:
        loop_vars = {loop.var for loop in loops}
        if value.name in loop_vars:
            if value.attribute not in FIELD_ATTRIBUTES:
                wanted = ", ".join(f"{value.name}.{a}" for a in sorted(FIELD_ATTRIBUTES))
                raise TemplateError(f"{where}: `{{{value.name}}}` is a field; write one of {wanted}")
            return
        shown = value.name + (f".{value.attribute}" if value.attribute else "")
        if value.attribute is not None:
            raise TemplateError(f"{where}: `{shown}`: only a loop's field has attributes ({{f.name}}, {{f.value}}...)")
        if value.name == "instruction" or value.name in inputs:
            return
        if value.name in signature.outputs and not test:
            return
        if value.name == signature.history_field:
            raise TemplateError(f"{where}: `{value.name}` is the history; mark where it goes with imp.turns()")
        raise TemplateError(
            f"{where}: `{shown}` is not an input of the signature "
            f"(inputs: {', '.join(inputs) or 'none'}; outputs: {', '.join(signature.outputs)}; "
            "and {instruction}); to write a brace, double it: {{ or }}"
        )

    # --- the dialect hooks ---------------------------------------------------------------

    def instruction(
        self,
        signature: Signature,
        guidance: Guidance | None = None,
        agent_line: str | None = DEFAULT_AGENT_LINE,
    ) -> str:
        """What `{instruction}` says: the function's name, the instructions, output guidance, the loop's lines."""
        parts: list[str] = []
        function = signature.metadata.get("function")
        if isinstance(function, str) and function:
            parts.append(f"Function: {function}")
        parts.append(signature.instructions)
        described = [f"- {f.name}: {f.desc}" for f in signature.outputs.values() if f.desc]
        if described:
            parts.append("Output guidance:\n" + "\n".join(described))
        lines = loop_lines(guidance, agent_line)
        if lines:
            parts.append("\n".join(lines))
        return "\n\n".join(p for p in parts if p)

    def default_system(self, signature: Signature, options: Mapping[str, Any]) -> str:
        return self._head_system(signature, options.get("inputs") or {}, FormatOptions.read(options))

    def _head_system(self, signature: Signature, values: Mapping[str, object], opts: FormatOptions) -> str:
        bound = self._bind(signature)
        if bound.system is not None and opts.guidance is None and opts.agent_line == DEFAULT_AGENT_LINE:
            return bound.system
        texts = [self._render(p, signature, values, opts) for p in self._head if p.role == "system"]
        return "\n\n".join(t for t in texts if t)

    def input_section(self, field: Field, formatted_value: str) -> str:
        return formatted_value

    def default_outputs(self, signature: Signature, outputs: Mapping[str, object], missing_message: str) -> str:
        bound = self._bind(signature)
        if bound.form is not None:
            return bound.form.write(outputs, missing_message)
        (field,) = signature.outputs.values()
        if field.name not in outputs:
            return missing_message.strip()
        return render_value(outputs[field.name], field)

    def response_instruction(self, signature: Signature) -> str | None:
        return None

    # --- formatting ----------------------------------------------------------------------

    def _render(self, part: _Part, signature: Signature, values: Mapping[str, object], opts: FormatOptions) -> str:
        bound = self._bind(signature)
        fields = signature.inputs
        out: list[str] = []

        def emit(nodes: tuple[Node, ...]) -> None:
            for node in nodes:
                if isinstance(node, Text):
                    out.append(node.text)
                elif isinstance(node, Value):
                    if node.name == "instruction":
                        plain = opts.guidance is None and opts.agent_line == DEFAULT_AGENT_LINE
                        out.append(
                            bound.instruction if plain else self.instruction(signature, opts.guidance, opts.agent_line)
                        )
                    else:
                        value = values.get(node.name)
                        if type(value) is str and opts.input_section_renderer is None:
                            out.append(value)  # what render_section gives a string, without the calls
                        elif value is not None:
                            out.append(self.render_section(fields[node.name], value, opts))
                elif isinstance(node, If):
                    emit(node.body if has_value(values.get(node.test.name)) else node.orelse)

        emit(bound.nodes[part.index])
        return "".join(out)

    def format_with(self, signature: Signature, inputs: Mapping[str, Any], opts: FormatOptions) -> list[Message]:
        history_name = signature.history_field
        task = signature.without(history_name) if history_name else signature
        self._bind(task)
        messages: list[Message] = []
        system_done = False
        for part in self._head:
            if part.role == "system" and not system_done:
                system_done = True
                content = self._system_text(task, inputs, opts)
            elif part.role == "system":
                continue  # every system message of the head is in the first one's text
            else:
                content = self._render(part, task, inputs, opts)
            if content or part.role != "system":
                messages.append({"role": part.role, "content": content})
        if not system_done and opts.system_renderer is not None:
            content = self._system_text(task, inputs, opts)
            if content:
                messages.insert(0, {"role": "system", "content": content})
        if opts.demos:
            self.check_demos(task, opts.demos)
            messages.extend(self.format_demos(task, opts.demos, opts))
        if history_name is not None:
            from imp.history import History

            history = inputs.get(history_name)
            if history is not None:
                messages.extend(
                    self.format_history(task, history if isinstance(history, History) else History(history), opts)
                )
        if not opts.omit_empty_request or any(inputs.get(name) is not None for name in task.inputs):
            request = [{"role": p.role, "content": self._render(p, task, inputs, opts)} for p in self._request]
            instruction = self.response_instruction(task) if opts.response_instruction else None
            last_user = self._last_user
            if instruction:
                request[last_user]["content"] = f"{request[last_user]['content']}\n\n{instruction}".strip()
            name = inputs.get("user_name")
            if name is not None and "user_name" not in signature.fields and message_name(name):
                request[last_user]["name"] = name
            messages.extend(request)  # type: ignore[arg-type]
        if self._prefill is not None:
            messages.append({"role": "assistant", "content": self._prefill})
        return with_placed_media(messages)

    def _system_text(self, signature: Signature, values: Mapping[str, object], opts: FormatOptions) -> str:
        """The system message, through `system_renderer` when one is given (its default sees the inputs)."""
        if opts.system_renderer is None:
            last = self._last
            plain = opts.guidance is None and opts.agent_line == DEFAULT_AGENT_LINE
            if plain and last is not None and last[0] is signature and last[1].system is not None:
                return last[1].system
            return self._head_system(signature, values, opts)
        render_opts = opts.as_dict()

        def default(sig: Signature, options: Mapping[str, object]) -> str:
            return self.default_system(sig, {**options, "inputs": values})

        render_opts["default_system"] = default
        return opts.system_renderer(signature, render_opts)

    def user_content(
        self,
        signature: Signature,
        values: Mapping[str, object],
        opts: FormatOptions,
        *,
        prefix: str = "",
        main_request: bool = False,
    ) -> str:
        """The request's user messages for these values (a demo's or a history turn's), as one text."""
        if not any(values.get(n) is not None for n in signature.inputs):
            return ""
        texts = [self._render(p, signature, values, opts) for p in self._request if p.role == "user"]
        body = "\n\n".join(t for t in texts if t.strip())
        return f"{prefix}\n\n{body}".strip() if prefix else body

    def check_demos(self, signature: Signature, demos: Sequence[Mapping[str, object]]) -> None:
        """Refuse a demo whose output value holds the form's text after it (it could not be read back)."""
        form = self._bind(signature).form
        if form is None:
            start = (self._prefill or "").strip()
            if not start or len(signature.outputs) != 1:
                return  # no prefill to start with (or the JSON fallback, whose form is its own)
            (name,) = signature.outputs
            for demo in demos:
                value = demo.get(name)
                if value is not None and not render_value(value).lstrip().startswith(start):
                    raise TemplateError(
                        f"the demo value of `{name}` does not start with the prefill {start!r}, and the whole reply "
                        "(the prefill and what follows) is the value; start the demo's value with it"
                    )
            return
        for demo in demos:
            for name in signature.outputs:
                if demo.get(name) is not None:
                    form.check_value(name, demo[name])

    # --- parsing -------------------------------------------------------------------------

    def field_splitter(self, signature: Signature) -> Splitter:
        bound = self._bind(signature.without(signature.history_field) if signature.history_field else signature)
        return prefilled(form_splitter(bound.form, signature), self._prefill)

    def parse_text(self, signature: Signature, text: str) -> dict[str, Any]:
        if self._prefill is not None and not text.lstrip().startswith(self._prefill.strip()):
            text = self._prefill + text
        form = self._bind(signature.without(signature.history_field) if signature.history_field else signature).form
        if form is None:
            (field,) = signature.outputs.values()
            if not text.strip():
                raise AdapterParseError("the reply is empty", adapter=self.name, fields=[field.name], completion=text)
            return self.complete(signature, {field.name: text.strip()}, completion=text)
        found = form.read(text)
        if not found:  # a loop step answered in plain text, outside the form: its `text_field`, as in every dialect
            plain = self.text_field_reply(signature, text)
            if plain is not None:
                return plain
        return self.complete(signature, found, completion=text)

    @property
    def fallback(self) -> Adapter | None:
        if self._json is None:
            self._json = TemplateJSONAdapter(self._template)
        return self._json


class TemplateJSONAdapter(TemplateAdapter):
    """The JSON fallback of a template: the same messages, the reply form written as one JSON object."""

    name = "TemplateJSONAdapter"

    def _check(self, signature: Signature) -> _Bound:
        return replace(super()._check(signature), form=None)  # the template must be valid either way

    def _source(self, part: _Part, signature: Signature) -> tuple[Node, ...]:
        has_form = any(
            (isinstance(n, For) and n.fields == "outputs" and uses_value(n))
            or (isinstance(n, Value) and n.name in signature.outputs)
            for n, _ in walk(part.nodes)
        )
        return self._json_form(part, signature) if has_form else part.nodes

    def _json_form(self, part: _Part, signature: Signature) -> tuple[Node, ...]:
        """The part's nodes with its reply form replaced by the JSON object the reply is."""
        import json

        skeleton = Text(json.dumps({f.name: placeholder(f) for f in signature.outputs.values()}, ensure_ascii=False))
        nodes = list(part.nodes)
        loops = [i for i, n in enumerate(nodes) if isinstance(n, For) and n.fields == "outputs" and uses_value(n)]
        if loops:
            nodes[loops[0]] = skeleton
        else:
            inline = [i for i, n in enumerate(nodes) if isinstance(n, Value) and n.name in signature.outputs]
            first, last = inline[0], inline[-1]
            before = nodes[first - 1] if first > 0 else None
            after = nodes[last + 1] if last + 1 < len(nodes) else None
            tail: list[Node] = [Text("\n" + after.text.partition("\n")[2])] if isinstance(after, Text) else []
            lead: list[Node] = [Text(before.text.rpartition("\n")[0] + "\n")] if isinstance(before, Text) else []
            start = first - 1 if lead else first
            stop = last + 2 if tail else last + 1
            nodes[start:stop] = [*lead, skeleton, *tail]
        return tuple(nodes)

    def default_outputs(self, signature: Signature, outputs: Mapping[str, object], missing_message: str) -> str:
        return JSONAdapter().default_outputs(signature, outputs, missing_message)

    def response_instruction(self, signature: Signature) -> str | None:
        return JSONAdapter().response_instruction(signature)

    def request_options(self, signature: Signature, lm: LMLike | None) -> dict[str, Any]:
        return JSONAdapter().request_options(signature, lm)

    def field_splitter(self, signature: Signature) -> Splitter:
        return prefilled(with_plain_text(JSONSplitter(frozenset(signature.outputs)), signature, "{`"), self._prefill)

    def parse_text(self, signature: Signature, text: str) -> dict[str, Any]:
        try:
            return JSONAdapter().parse_text(signature, text)
        except AdapterParseError as exc:
            raise AdapterParseError(
                exc.message, adapter=self.name, fields=exc.fields, completion=text, parsed=exc.parsed
            ) from None

    @property
    def fallback(self) -> Adapter | None:
        return None


register_adapter(TemplateAdapter, saved="template", dump=TemplateAdapter.dump, load=TemplateAdapter.load)
