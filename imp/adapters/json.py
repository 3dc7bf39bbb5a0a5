"""The JSON adapter: inputs in `[[ ## name ## ]]` sections, outputs as one JSON object."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from pydantic_core import to_jsonable_python

from imp._json import OverLimit, find_object
from imp.adapters._fields import field_descriptions, placeholder
from imp.adapters._registry import register_adapter
from imp.adapters._split import JSONSplitter, Splitter, with_plain_text
from imp.adapters.base import DEFAULT_AGENT_LINE, Adapter, LMLike, loop_lines, objective
from imp.errors import AdapterParseError
from imp.signature import Field, Signature
from imp.values import coerce_value, format_requirement, load_json_object, unwrap_fence

__all__ = ["JSONAdapter", "find_json_object", "strict_output_schema"]

_NOT_AN_OBJECT = "LM response cannot be serialized to a JSON object."


def _why(error: ValueError) -> str:
    """What a reply that is not an object is told: a limit's own words, else that it is not an object."""
    return str(error) if isinstance(error, OverLimit) else _NOT_AN_OBJECT


def find_json_object(text: str) -> str | None:
    """The first balanced `{...}` block in text (braces inside strings ignored), or None (one pass)."""
    return find_object(text)


def _strict(node: object) -> bool:
    """Make every object closed with all properties required; False if an object is open-ended."""
    if isinstance(node, dict):
        if node.get("type") == "object" or "properties" in node:
            props = node.get("properties")
            if not props:
                return False
            node["required"] = list(props)
            node["additionalProperties"] = False
        node.pop("default", None)
        return all(_strict(v) for k, v in node.items() if k not in ("required", "enum", "const"))
    if isinstance(node, list):
        return all(_strict(v) for v in node)
    return True


def strict_output_schema(signature: Signature) -> dict[str, Any] | None:
    """The outputs' schema for strict structured output, or None when an output is an open object."""
    schema = copy.deepcopy(signature.json_schema())
    return schema if _strict(schema) else None


class JSONAdapter(Adapter):
    """Asks for one JSON object holding the outputs; reads it back with repair."""

    name = "JSONAdapter"

    def default_system(self, signature: Signature, options: Mapping[str, Any]) -> str:
        agent_line = options.get("agent_line", DEFAULT_AGENT_LINE)
        instructions = "\n".join([signature.instructions, *loop_lines(options.get("guidance"), agent_line)])
        inputs = "\n\n".join(f"[[ ## {n} ## ]]\n{{{n}}}" for n in signature.inputs)
        outputs = json.dumps({n: placeholder(f) for n, f in signature.outputs.items()}, indent=2, ensure_ascii=False)
        parts = [
            "All interactions will be structured in the following way, with the appropriate values filled in.",
            "Inputs will have the following structure:",
            inputs,
            "Outputs will be a JSON object with the following fields.",
            outputs,
        ]
        description = (
            f"Your input fields are:\n{field_descriptions(signature.inputs)}\n"
            f"Your output fields are:\n{field_descriptions(signature.outputs)}"
        )
        structure = "\n\n".join(p for p in parts if p).strip()
        return f"{description}\n{structure}\n{objective(instructions)}"

    def input_section(self, field: Field, formatted_value: str) -> str:
        return f"[[ ## {field.name} ## ]]\n{formatted_value}"

    def default_outputs(self, signature: Signature, outputs: Mapping[str, object], missing_message: str) -> str:
        body = {n: to_jsonable_python(outputs[n]) if n in outputs else missing_message for n in signature.outputs}
        return json.dumps(body, indent=2, ensure_ascii=False)

    def response_instruction(self, signature: Signature) -> str | None:
        parts = []
        for name, f in signature.outputs.items():
            requirement = format_requirement(f)
            parts.append(f"`{name}`" + (f" (must be formatted as {requirement})" if requirement else ""))
        return "Respond with a JSON object in the following order of fields: " + ", then ".join(parts) + "."

    def request_options(self, signature: Signature, lm: LMLike | None) -> dict[str, Any]:
        support = lm.capabilities.response_format if lm is not None else "none"
        if support == "json_schema":
            schema = strict_output_schema(signature)
            if schema is not None:
                return {
                    "response_format": {
                        "type": "json_schema",
                        "json_schema": {"name": "outputs", "schema": schema, "strict": True},
                    }
                }
            return {"response_format": {"type": "json_object"}}
        if support == "json_object":
            return {"response_format": {"type": "json_object"}}
        return {}

    def field_splitter(self, signature: Signature) -> Splitter:
        return with_plain_text(JSONSplitter(frozenset(signature.outputs)), signature, "{`")

    def parse_text(self, signature: Signature, text: str) -> dict[str, Any]:
        plain = self.text_field_reply(signature, text)
        if plain is not None:
            return plain
        body = unwrap_fence(text.strip()).strip()
        try:
            values = load_json_object(body)
        except ValueError as first:
            block = find_json_object(body)
            if block is None:
                raise AdapterParseError(_why(first), adapter=self.name, completion=text) from None
            try:
                values = load_json_object(block)
            except ValueError as exc:
                raise AdapterParseError(_why(exc), adapter=self.name, completion=text) from None
        present = {k: v for k, v in values.items() if k in signature.outputs}
        return self.complete(signature, present, completion=text, coerce=coerce_value)


register_adapter(JSONAdapter, saved="JSONAdapter", option="json")
