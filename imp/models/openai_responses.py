"""The client for OpenAI's Responses API (`imp.lm("openai-responses:gpt-5.4-mini")`).

Requests go to `{base_url}/responses` with `store: false`: the history stays imp's, and each
request carries it whole, so a turn's requests share their prefix for OpenAI's prompt cache.
Reasoning models return their reasoning as encrypted `reasoning` items
(`include: ["reasoning.encrypted_content"]`); imp keeps them in the turn's history and sends them
back in order before the function calls they led to, so the model keeps its reasoning across the
steps of a tool-using turn, which Chat Completions cannot do.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, get_args

from imp.errors import InvalidResponse
from imp.models._http import HTTPLM, StreamState
from imp.models._options import Options, ReasoningSummary, ResponsesOptions
from imp.models._responses_content import ResponsesContent
from imp.models._responses_output import read_output, to_response
from imp.models._responses_stream import ResponsesStream
from imp.models._responses_wire import input_items, text_format, wire_tool, wire_tool_choice
from imp.models.base import LMCapabilities, LMResponse
from imp.models.errors import error_from_payload
from imp.records import Message

__all__ = ["OpenAIResponsesLM", "ReasoningSummary"]

ENCRYPTED_REASONING = "reasoning.encrypted_content"

# OpenAI's reasoning models (not the `-chat` ones). They take no sampling options while they
# reason: `temperature` / `top_p` only at their default of 1, or with `reasoning_effort="none"`.
_REASONING_MODEL = re.compile(r"^(gpt-5|o[134])(?![-_.]?chat)([-_:.].*)?$")
_SAMPLING: Final = ("temperature", "top_p")


class OpenAIResponsesLM(HTTPLM):
    """A client for OpenAI's Responses API (and servers that speak it, through `base_url`)."""

    provider = "openai-responses"
    default_base_url = "https://api.openai.com/v1"
    api_key_env = "OPENAI_API_KEY"
    options_type = ResponsesOptions
    # No stop sequences and no seed in this API: refused before anything is sent.
    unsupported_options = frozenset({"stop", "seed"})
    capabilities = LMCapabilities(tool_calling=True, named_tool_choice=True, response_format="json_schema")
    step_down_options = frozenset({"response_format", "tool_choice", "parallel_tool_calls"})

    @property
    def url(self) -> str:
        return f"{self.base_url}/responses"

    @property
    def reasons(self) -> bool:
        """Whether the model is one of OpenAI's reasoning models (its reasoning is kept and replayed)."""
        return bool(_REASONING_MODEL.match(self.model))

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        return {"authorization": f"Bearer {api_key}"} if api_key else {}

    def check_options(self, options: Mapping[str, object]) -> None:
        summary = options.get("reasoning_summary")
        if summary is not None and summary not in get_args(ReasoningSummary):
            raise ValueError(
                f"{self.provider}: reasoning_summary must be one of {', '.join(get_args(ReasoningSummary))}, "
                f"got {summary!r}"
            )
        super().check_options(options)
        if self.reasons and options.get("reasoning_effort") != "none":
            for key in _SAMPLING:
                value = options.get(key)
                if value is not None and value != 1:
                    raise ValueError(
                        f"{self.provider}: {self.model} is a reasoning model and takes no {key} (only its "
                        f"default, 1) while it reasons; got {key}={value!r}: leave {key} out, or pass "
                        'reasoning_effort="none" on a model that can answer without reasoning'
                    )

    def build_body(self, messages: Sequence[Message], options: Options, *, stream: bool) -> dict[str, object]:
        instructions, items = input_items(messages, ResponsesContent(self))
        body: dict[str, object] = {"model": self.model}
        if instructions:
            body["instructions"] = instructions
        body["input"] = items
        sampling = not self.reasons or options.get("reasoning_effort") == "none"
        for key in _SAMPLING:
            if key in options and sampling:  # a reasoning model's default 1 is left out (it refuses the field)
                body[key] = options[key]
        if "max_tokens" in options:
            body["max_output_tokens"] = options["max_tokens"]
        if "tools" in options:
            body["tools"] = [wire_tool(t) for t in options["tools"]]
        if "tool_choice" in options:
            body["tool_choice"] = wire_tool_choice(options["tool_choice"])
        if "parallel_tool_calls" in options:
            body["parallel_tool_calls"] = options["parallel_tool_calls"]
        fmt = text_format(options.get("response_format"))
        if fmt is not None:
            body["text"] = {"format": fmt}
        reasoning: dict[str, object] = {}
        if "reasoning_effort" in options:
            reasoning["effort"] = options["reasoning_effort"]
        if "reasoning_summary" in options:
            reasoning["summary"] = options["reasoning_summary"]
        if reasoning:
            body["reasoning"] = reasoning
        body["store"] = False  # imp holds the history; nothing is kept on OpenAI's side
        if self.reasons or reasoning:
            body["include"] = [ENCRYPTED_REASONING]
        if stream:
            body["stream"] = True
        body.update(options.get("extra_body") or {})
        return body

    def parse_response(self, body: Any, headers: Mapping[str, str], *, step: int) -> LMResponse:
        if (isinstance(body, Mapping) and body.get("status") == "failed") or _error_only(body):
            error = body.get("error") or {"message": "the response failed"}
            raise error_from_payload(
                status=None,
                body={"error": error},
                provider=self.provider,
                headers=headers,
                secrets=self.secrets,
                in_stream=True,
            )
        if not isinstance(body, Mapping) or not isinstance(body.get("output"), list):
            raise InvalidResponse(
                "the response is not a Responses API response (no output)",
                status=200,
                provider=self.provider,
                body=body if isinstance(body, Mapping) else str(body)[:2000],
            )
        return to_response(
            body,
            read_output(body["output"], step),
            model=self.model,
            request_id=headers.get("x-request-id") or body.get("id"),
        )

    def stream_state(self, *, step: int, headers: Mapping[str, str]) -> StreamState:
        return ResponsesStream(self, step, headers.get("x-request-id"))


def _error_only(body: object) -> bool:
    """A 200 whose body is an error object and no response (a proxy relaying a failure)."""
    return isinstance(body, Mapping) and isinstance(body.get("error"), Mapping) and "output" not in body
