"""imp's first look: an escalation agent routes a support ticket to a squad and finds who is on call.

Run it with `make demo` (or `python examples/demo.py`; it is not part of the installed package).
It prints each request the agent sends (the first in full, then only what each later request adds:
each request is the previous one plus the newest exchange), each reply with its tool calls, the
tools' results, the answer and how the turn ended. Without configuration the LM is a `ScriptedLM`,
so it runs anywhere; to use a real model, set
`IMP_LM=provider:model` (`openai:gpt-5.4-mini`, `anthropic:claude-sonnet-4-6`, `openrouter:...`)
and the provider's key (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, `OPENROUTER_API_KEY`);
`IMP_BASE_URL` points `openai:` at any OpenAI-compatible server.

Colour is used only when stdout is a terminal and `NO_COLOR` is not set.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TextIO

import anyio

import imp
from imp.exchanges import Exchange, recent_exchanges
from imp.models.base import Message
from imp.models.scripted import Step

__all__ = ["main"]

SIGNATURE = "ticket -> team: enum[atlas,harbor,beacon,quill], contact: string"
INSTRUCTIONS = (
    "Find the squad that owns the ticket and its on-call engineer. "
    "atlas owns money, harbor the platform, beacon identity, quill the product."
)
TICKET = (
    "Hi, we were charged twice for our March invoice (INV-20417) and the second payment has already "
    "left our account. Can you refund the duplicate?"
)
ON_CALL = {"atlas": "Maya", "harbor": "Tom", "beacon": "Ines", "quill": "Raj"}
SCRIPT: list[Step] = [
    {
        "next_thought": "A duplicate charge on an invoice is about money, and atlas owns money. "
        "I'll look up who is on call for atlas.",
        "tool_calls": [{"name": "on_call", "arguments": {"team": "atlas"}}],
    },
    {"tool_calls": [{"name": "submit", "arguments": {"team": "atlas", "contact": "Maya"}}]},
]


def on_call(team: Literal["atlas", "harbor", "beacon", "quill"]) -> str:
    """Look up the on-call engineer for a squad."""
    return ON_CALL[team]


KEY_VARIABLES = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "openrouter": "OPENROUTER_API_KEY"}


# --- terminal styling ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Style:
    """ANSI styling (or none) and the characters for rules and gutters."""

    color: bool
    unicode: bool
    width: int

    @classmethod
    def detect(cls, stream: TextIO) -> Style:
        """Colour only on a terminal without NO_COLOR; box characters only if the stream can encode them."""
        is_tty = hasattr(stream, "isatty") and stream.isatty()
        color = is_tty and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
        try:
            "━│▸·—".encode(getattr(stream, "encoding", None) or "ascii")
            unicode = True
        except (UnicodeEncodeError, LookupError):
            unicode = False
        columns = shutil.get_terminal_size((100, 24)).columns if is_tty else 100
        return cls(color=bool(color), unicode=unicode, width=max(60, min(columns, 100)))

    def _sgr(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color and text else text

    def bold(self, text: str) -> str:
        return self._sgr("1", text)

    def dim(self, text: str) -> str:
        return self._sgr("2", text)

    def cyan(self, text: str) -> str:
        return self._sgr("36", text)

    def green(self, text: str) -> str:
        return self._sgr("32", text)

    def yellow(self, text: str) -> str:
        return self._sgr("33", text)

    def red(self, text: str) -> str:
        return self._sgr("31", text)

    def magenta(self, text: str) -> str:
        return self._sgr("35", text)

    @property
    def rule_char(self) -> str:
        return "━" if self.unicode else "="

    @property
    def gutter(self) -> str:
        return "│ " if self.unicode else "| "

    @property
    def bullet(self) -> str:
        return "▸" if self.unicode else ">"

    @property
    def dash(self) -> str:
        return "—" if self.unicode else "-"


class Printer:
    """Writes the demo's sections: headers, key/value rows, and wrapped blocks of text."""

    def __init__(self, out: TextIO, style: Style) -> None:
        self.out = out
        self.s = style

    def line(self, text: str = "") -> None:
        self.out.write(text + "\n")

    def title(self, text: str) -> None:
        self.line(self.s.bold(text))

    def section(self, number: int, name: str, blurb: str) -> None:
        head = f"{self.s.rule_char * 2} {number}. {name} "
        self.line()
        self.line(self.s.cyan(self.s.bold(head)) + self.s.cyan(self.s.rule_char * max(3, self.s.width - len(head))))
        for piece in wrap(blurb, self.s.width):
            self.line(self.s.dim(piece))

    def heading(self, text: str, note: str = "") -> None:
        self.line()
        self.line(f"{self.s.cyan(self.s.bullet)} {self.s.bold(text)}" + (f"  {self.s.dim(note)}" if note else ""))

    def rows(self, rows: Sequence[tuple[str, str]], indent: int = 2) -> None:
        key_width = max(len(k) for k, _ in rows)
        pad = " " * indent
        for key, value in rows:
            lead = f"{pad}{key:<{key_width}}  "
            pieces = wrap(value, self.s.width - len(lead)) or [""]
            self.line(self.s.dim(lead) + pieces[0])
            for piece in pieces[1:]:
                self.line(" " * len(lead) + piece)

    def block(self, label: str, text: str, color: Callable[[str], str] | None = None) -> None:
        """A labelled block with a gutter, each line wrapped and keeping its own indentation."""
        self.line(f"  {self.s.magenta(self.s.bold(label))}")
        gutter = "  " + self.s.gutter
        for piece in wrap(text, self.s.width - len(gutter), hang="    "):
            if not piece:
                self.line(self.s.dim(gutter.rstrip()))
            else:
                self.line(self.s.dim(gutter) + (color(piece) if color else piece))


_MARKER = re.compile(r"\[\[ ## \w+ ## \]\]")
_NBSP = "\x00"


def wrap(text: str, width: int, hang: str = "") -> list[str]:
    """Wrap each line of `text` to `width`, keeping blank lines and each line's leading spaces.

    A wrapped line's continuation is indented by `hang` more; `[[ ## field ## ]]` markers never break.
    """
    out: list[str] = []
    for raw in text.splitlines() or [""]:
        line = raw.rstrip()
        if len(line) <= width:
            out.append(line)
            continue
        lead = line[: len(line) - len(line.lstrip())]
        body = _MARKER.sub(lambda m: m.group(0).replace(" ", _NBSP), line.strip())
        pieces = textwrap.wrap(
            body,
            width=max(20, width),
            initial_indent=lead,
            subsequent_indent=lead + hang,
            break_on_hyphens=False,
            break_long_words=False,
        )
        out.extend(piece.replace(_NBSP, " ") for piece in pieces)
    return out


# --- the LM -------------------------------------------------------------------------------------


@dataclass
class Choice:
    """The LM the demo runs on, how to describe it, and whether it is scripted."""

    lm: imp.LM
    description: str
    scripted: bool


def lm_factory() -> Callable[..., imp.LM] | None:
    """`imp.lm`, the provider-client factory, when this build has it."""
    found: Any = getattr(imp, "lm", None)
    return found if callable(found) else None


def choose_lm(p: Printer) -> Choice | None:
    """A real model from IMP_LM, else a ScriptedLM; None (after saying why) if IMP_LM cannot be used."""
    spec = os.environ.get("IMP_LM", "").strip()
    if not spec:
        scripted = imp.ScriptedLM(SCRIPT, model="scripted-demo")
        return Choice(scripted, "ScriptedLM with canned replies (set IMP_LM=provider:model to use a real model)", True)
    factory = lm_factory()
    if factory is None:
        p.line(p.s.red(f"IMP_LM={spec} is set, but provider clients are not available in this build of imp."))
        p.line("Unset IMP_LM to run the demo on its scripted LM.")
        return None
    provider = spec.partition(":")[0].lower()
    base_url = os.environ.get("IMP_BASE_URL") or None
    key_variable = KEY_VARIABLES.get(provider)
    if key_variable and not os.environ.get(key_variable) and base_url is None:
        p.line(p.s.red(f"IMP_LM={spec} needs an API key: set {key_variable}."))
        return None
    try:
        lm = factory(spec, base_url=base_url) if base_url else factory(spec)
    except (ValueError, TypeError, imp.ImpError) as exc:
        p.line(p.s.red(f"IMP_LM={spec} cannot be used: {exc}"))
        return None
    where = f" at {base_url}" if base_url else ""
    return Choice(lm, f"{spec}{where} (from IMP_LM)", False)


# --- one program ----------------------------------------------------------------------------------


def show_messages(p: Printer, messages: Sequence[Message], note: str) -> None:
    p.heading("Request", note)
    for index, message in enumerate(messages):
        if index:
            p.line()
        role = str(message.get("role", "?"))
        if message.get("tool_call_id"):
            role += f" (result of {message['tool_call_id']})"
        content = message.get("content")
        text = content if isinstance(content, str) else repr(content)
        calls = message.get("tool_calls") or ()
        lines = [text] if text else []
        lines.extend(f"-> {c.name}({json.dumps(dict(c.arguments), ensure_ascii=False)})  [{c.id}]" for c in calls)
        p.block(role, "\n".join(lines))


def show_reply(p: Printer, exchange: Exchange) -> None:
    if exchange.error is not None:
        p.heading("Reply", "the request failed")
        p.block("error", exchange.error, p.s.red)
        return
    response = exchange.response
    if response is None:
        return
    p.heading("Reply", f"finish_reason={response.finish_reason}")
    lines = [response.text] if response.text else []
    lines.extend(f"-> {call.name}({json.dumps(dict(call.arguments))})  [{call.id}]" for call in response.tool_calls)
    p.block("assistant", "\n".join(lines) or "(nothing)")


def show_steps(p: Printer, prediction: imp.Prediction) -> None:
    history = prediction.metadata.history
    if history is None:
        return
    p.heading("The history", "what the turn recorded, step by step")
    for number, entry in enumerate(history, start=1):
        lines = []
        if entry.get("next_thought"):
            lines.append(f"thought: {entry['next_thought']}")
        results = {r.id: r for r in entry.get("tool_call_results") or ()}
        for call in entry.get("tool_calls") or ():
            result = results.get(call.id)
            shown = (
                "(no result)"
                if result is None
                else (json.dumps(result.result) if result.ok else f"Error: {result.error}")
            )
            outcome = f" [{result.outcome}]" if result is not None else ""
            lines.append(f"{call.name}({json.dumps(dict(call.arguments))}) = {shown}{outcome}")
        p.block(f"step {number}", "\n".join(lines) or "(no calls)")


def show_answer(p: Printer, prediction: imp.Prediction) -> None:
    p.heading("Answer")
    p.rows([(name, p.s.green(p.s.bold(str(value)))) for name, value in prediction.items()])


def describe_usage(usage: imp.Usage | None, scripted: bool) -> str:
    if usage is None:
        return "not tracked"
    requests = f"{usage.requests} request{'s' if usage.requests != 1 else ''}"
    if scripted and not usage.total_tokens:
        return f"{requests}, no tokens (a scripted LM counts none)"
    parts = [requests, f"{usage.input_tokens} tokens in", f"{usage.output_tokens} out"]
    if usage.cached_tokens:
        parts.append(f"{usage.cached_tokens} cached")
    if usage.reasoning_tokens:
        parts.append(f"{usage.reasoning_tokens} reasoning")
    if usage.cost is not None:
        parts.append(f"${usage.cost:.6f}")
    return ", ".join(parts)


def show_ending(p: Printer, prediction: imp.Prediction, scripted: bool) -> None:
    meta = prediction.metadata
    p.heading("How it ended")
    rows = [
        ("termination_reason", str(meta.termination_reason)),
        ("complete", "yes" if prediction.complete else "no"),
    ]
    if meta.termination_cause:
        rows.append(("termination_cause", str(meta.termination_cause)))
    rows.append(("usage", describe_usage(meta.usage, scripted)))
    p.rows(rows)


async def run_agent(p: Printer, agent: imp.ReAct, scripted: bool) -> imp.Prediction | None:
    """Run the agent on the ticket and print every request, reply and step; None if the call failed."""
    before = len(recent_exchanges(200))
    failure: imp.ImpError | None = None
    prediction: imp.Prediction | None = None
    try:
        prediction = await imp.call(agent, ticket=TICKET)
    except imp.ImpError as exc:
        failure = exc
    exchanges = recent_exchanges(200)[before:] if before < 200 else recent_exchanges(1)
    previous: Sequence[Message] = ()
    for number, exchange in enumerate(exchanges, start=1):
        messages = list(exchange.messages)
        if previous and messages[: len(previous)] == list(previous):
            shown, note = messages[len(previous) :], f"{number}: the previous request, plus"
        else:
            shown, note = messages, f"{number}: {len(messages)} messages to {exchange.model}"
        show_messages(p, shown, note)
        show_reply(p, exchange)
        previous = messages
    if failure is not None or prediction is None:
        p.heading("How it ended", "with an error")
        p.block(type(failure).__name__, str(failure), p.s.red)
        return None
    show_steps(p, prediction)
    show_answer(p, prediction)
    show_ending(p, prediction, scripted)
    return prediction


async def run(out: TextIO) -> int:
    p = Printer(out, Style.detect(out))
    choice = choose_lm(p)
    if choice is None:
        return 2
    signature = imp.signature(SIGNATURE, INSTRUCTIONS)
    tool = imp.tool(on_call)
    p.title(f"imp {imp.__version__} {p.s.dash} the escalation agent: route a ticket, find who is on call")
    p.rows(
        [
            ("signature", SIGNATURE),
            ("instructions", INSTRUCTIONS),
            ("tools", f"{tool.name}: {tool.description}"),
            ("program", "imp.react(signature, [on_call], max_iters=5)"),
            ("LM", choice.description),
            ("ticket", TICKET),
        ],
        indent=0,
    )
    agent = imp.react(signature, [tool], lm=choice.lm, max_iters=5)
    try:
        prediction = await run_agent(p, agent, choice.scripted)
    finally:
        await choice.lm.aclose()
    p.line()
    p.line(p.s.cyan(p.s.rule_char * p.s.width))
    if prediction is None:
        p.line(p.s.red("The agent did not answer."))
        return 1
    p.line(
        f"team={p.s.green(str(prediction.get('team')))}  contact={p.s.green(str(prediction.get('contact')))}  "
        f"termination_reason={prediction.metadata.termination_reason}"
    )
    if choice.scripted:
        p.line(
            p.s.dim("The replies were scripted. Set IMP_LM=provider:model and the provider's key to ask a real model.")
        )
    return 0 if prediction.complete else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo, printing to stdout; the exit code is 0 when every program answered."""
    del argv
    try:
        return anyio.run(run, sys.stdout)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
