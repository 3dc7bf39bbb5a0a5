"""Every template in docs/templates.md round-trips: a demo written through it parses back to the same values."""

from __future__ import annotations

import contextlib
import io
import linecache
import types
import typing
from pathlib import Path
from typing import Any

import pytest
from test_docs import python_blocks

import imp
from imp.signature import Field
from imp.values import base_annotation

PAGE = Path(__file__).resolve().parents[3] / "docs" / "templates.md"


def _namespace() -> dict[str, Any]:
    module = types.ModuleType("docs_templates_round_trip")
    out = io.StringIO()
    for block in python_blocks(PAGE.read_text(encoding="utf-8")):
        name = f"{PAGE}:round-trip-block{block.number}"
        linecache.cache[name] = (len(block.source), None, block.source.splitlines(True), name)
        with contextlib.redirect_stdout(out):
            exec(compile(block.source, name, "exec"), module.__dict__)
    imp.configure(lm=None)
    return module.__dict__


def _sample(field: Field) -> Any:
    annotation = base_annotation(field.annotation)
    if annotation is int:
        return 4
    if annotation is float:
        return 2.5
    if annotation is bool:
        return True
    if typing.get_origin(annotation) is typing.Literal:
        return typing.get_args(annotation)[-1]
    return f"A value for {field.name}, over\ntwo lines."


def _pairs() -> list[tuple[str, imp.TemplateAdapter, imp.Signature]]:
    pairs: list[tuple[str, imp.TemplateAdapter, imp.Signature]] = []
    for name, value in _namespace().items():
        program = value.program if isinstance(value, imp.FunctionProgram) else value
        adapter = getattr(program, "adapter", None)
        if not isinstance(adapter, imp.TemplateAdapter):
            continue
        if isinstance(program, imp.ReAct):
            pairs.append((name, adapter, program.step_signature(program.finish)))
        else:
            pairs.append((name, adapter, program.signature))
    return pairs


PAIRS = _pairs()


def test_the_page_has_templates() -> None:
    assert {name for name, _, _ in PAIRS} >= {"summarize", "pirate_summary", "rate", "person", "qa", "weather"}


@pytest.mark.parametrize(("name", "adapter", "signature"), PAIRS, ids=[p[0] for p in PAIRS])
def test_a_demo_written_through_the_template_parses_back(
    name: str, adapter: imp.TemplateAdapter, signature: imp.Signature
) -> None:
    task = signature.without(signature.history_field) if signature.history_field else signature
    outputs = {n: _sample(f) for n, f in task.outputs.items()}
    prefill = adapter.template[-1].content if isinstance(adapter.template[-1], imp.TemplateMessage) else ""
    if prefill and len(outputs) == 1 and adapter.template[-1].role == "assistant":  # type: ignore[union-attr]
        (only,) = outputs
        outputs[only] = f"{prefill} {outputs[only]}"  # the whole reply, prefill included, is the value
    demo = {**{n: f"input {n}" for n in task.inputs}, **outputs}
    messages = adapter.format(task, {n: demo[n] for n in task.inputs}, demos=[demo])
    written = next(m for m in messages if m["role"] == "assistant")
    assert adapter.parse(task, written["content"]) == outputs
    fallback = adapter.fallback
    assert fallback is not None
    json_written = next(m for m in fallback.format(task, {}, demos=[demo]) if m["role"] == "assistant")
    assert fallback.parse(task, json_written["content"]) == outputs
