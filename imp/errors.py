"""The ImpError family: every error imp raises on purpose, in one tree a caller catches by class.

    ImpError
    ├── SignatureError (ValueError) ··········· a signature that cannot be built
    ├── TemplateError (ValueError) ············ a template that cannot be used or read back
    ├── FunctionError (TypeError) ············· a function that cannot be a function program
    ├── MissingInputError (ValueError) ········ a required input was not given
    ├── InvalidInputError (ValueError) ········ an input value that does not fit its field
    ├── MediaRefused (ValueError) ············· an image, audio or document the provider cannot take
    ├── CoercionError (ValueError) ············ a reply's value that does not fit its field (`imp.values`)
    ├── AdapterParseError ····················· a reply that does not fit the output fields
    ├── DeadlineExceeded (TimeoutError) ······· the current `imp.deadline` passed
    ├── BudgetExceeded ························ a request or tool call would pass an `imp.Budget`'s limit
    ├── ReActStepError ························ the last request of a ReAct turn failed
    ├── ResumeError (ValueError) ·············· decisions that cannot resume a paused turn (none run)
    ├── Retry ································· raised by a validator: "this answer is wrong because ..."
    ├── ValidationFailed ······················ every attempt a validator allowed was refused
    ├── ToolError ····························· a tool's failure, in the tool's own words
    ├── JournalMismatch ······················· a replayed step no longer matches the run's journal
    ├── JournalError ·························· a journal that cannot be opened or read
    │   └── JournalBusy ······················· a run or a session another call is running now
    ├── ExecutionCancelled ···················· an authorizer's `Cancel`: the whole call ends
    ├── LMError ······························· a failed LM request: status, provider, (redacted) body
    │   ├── ConnectionFailed ·················· no response: refused, DNS, timeout, reset   (retryable)
    │   ├── StreamBroken ······················ a stream cut off after it started           (retryable)
    │   ├── ProviderUnavailable ··············· 5xx, 408, 425, 529 "overloaded"             (retryable)
    │   ├── RateLimited ······················· 429: a throttle                             (retryable)
    │   ├── QuotaExceeded ····················· billing or quota refused (402, or a 429 saying so)
    │   ├── AuthenticationError ··············· 401 / 403: the key was refused
    │   ├── ContentFiltered ··················· the provider's filter stopped the completion
    │   ├── InvalidResponse ··················· a 2xx whose body is not a completion
    │   │   └── ResponseTooLarge ·············· a reply (or one stream event) over `max_response_bytes`
    │   └── BadRequest ························ the provider refused the request itself (4xx, 422)
    │       ├── NotFound ······················ 404: a wrong URL or model name
    │       ├── ContextWindowExceeded ········· the prompt does not fit the model's context
    │       └── UnsupportedOption ············· the server refuses a request option
    │           └── ToolChoiceUnsupported ····· a named or required `tool_choice` refused
    ├── SaveError (ValueError) ················ a program that cannot be saved faithfully
    ├── LoadError (ValueError) ················ a saved file that cannot be loaded
    │   └── ChecksumError ····················· its contents no longer match its checksum
    ├── EvaluationError ······················· an evaluation stopped at `max_errors`
    ├── OptimizationError (RuntimeError) ······ an optimizer stopped at `max_errors`
    ├── MCPError ······························ an MCP import failed (`imp.mcp`, the `mcp` extra)
    │   ├── InvalidMCPServer (ValueError) ····· a descriptor that is not a server
    │   ├── MCPServerNotAuthorized ············ neither trusted nor allowed: nothing was started
    │   ├── MCPEnvironmentError (RuntimeError)  a header's environment variable is not set
    │   ├── MCPConnectionError ················ servers that failed to start, initialize or list tools
    │   └── MCPToolNameError ·················· a tool name imp cannot offer
    ├── WorkerStartError (RuntimeError) ······· a Ray worker could not load the program (`imp.ray`)
    ├── WorkerLost ···························· a Ray worker died twice running one batch (`imp.ray`)
    └── RemoteError ··························· a worker's exception that could not travel back (`imp.ray`)

Each class is importable from `imp`, or from the module named at the end of its line. Errors of
misuse (a wrong argument's type or value, a method called in the wrong state) are Python's own
`TypeError` and `ValueError`, as in the standard library, and name the argument and the fix; the
classes above that also derive from one of them are caught by either name. `CoercionError` stays
inside the adapters, which raise `AdapterParseError` for it. tests/test_error_tree.py checks this
drawing against the classes.

An `LMError`'s kind is its class: `except imp.ContextWindowExceeded` or `except imp.RateLimited`.
The flags of older code (`retryable`, `context_window_exceeded`, `content_filtered`,
`tool_choice_unsupported`) are read-only properties derived from the class. Like `OSError`, calling
`LMError(...)` itself builds the subclass its arguments name (`status=429` gives `RateLimited`,
`context_window_exceeded=True` gives `ContextWindowExceeded`), so scripted tests can raise provider
failures without knowing the tree. `retryable` means that sending the same request again may
succeed: imp's clients retry those kinds before the first byte of a response; a broken stream is
raised for the caller to retry.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal, get_args

from imp._redact import redact_text
from imp.records import ToolOutcome

__all__ = [
    "AdapterParseError",
    "AuthenticationError",
    "BadRequest",
    "ConnectionFailed",
    "ContentFiltered",
    "ContextWindowExceeded",
    "DeadlineExceeded",
    "ImpError",
    "JournalBusy",
    "JournalError",
    "JournalMismatch",
    "InvalidInputError",
    "InvalidResponse",
    "LMError",
    "MediaRefused",
    "MissingInputError",
    "NotFound",
    "ProviderUnavailable",
    "QuotaExceeded",
    "RateLimited",
    "ReActStepError",
    "ResponseTooLarge",
    "ResumeError",
    "Retry",
    "SignatureError",
    "StreamBroken",
    "ToolChoiceUnsupported",
    "ToolError",
    "UnsupportedOption",
    "ValidationFailed",
    "lm_error_kind",
]


class ImpError(Exception):
    """Root of every error imp raises on purpose."""


class JournalMismatch(ImpError):
    """A replayed step of a journaled run no longer matches what was recorded (the program, its
    instructions or the inputs changed): the run is not continued on a mix of old and new steps."""

    def __init__(self, message: str, *, run_id: str = "", step: str = "", seq: int | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.step = step
        """The step's key in the run (its position)."""
        self.seq = seq
        """The step's number in the journal, for `journal.fork(run_id, new_id, before=seq)`."""


class JournalError(ImpError):
    """A journal that cannot be opened, is newer than this imp, or holds a record that does not read."""


class JournalBusy(JournalError):
    """A run (or a session's turn) that another call is running right now, in this process or in
    another: running it here too would run again what is not recorded yet (or keep a session's
    history without that call's turn). Call again once the other call has ended; a service answers
    it as busy (HTTP 409)."""

    def __init__(self, message: str, *, kind: Literal["run", "session"] = "run", key: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        """`"run"` (a journal's run id) or `"session"` (a session store's session id)."""
        self.key = key
        """The run id or the session id."""


class SignatureError(ImpError, ValueError):
    """A signature that cannot be built: names the position with a caret line."""

    def __init__(self, message: str, *, text: str | None = None, position: int | None = None) -> None:
        self.reason = message
        self.text = text
        self.position = position
        if text is not None and position is not None:
            message = f"{message}\n  {text}\n  {' ' * position}^"
        super().__init__(message)


class MissingInputError(ImpError, ValueError):
    """A required input field was not given; raised before any LM call."""

    def __init__(self, names: Sequence[str], given: Sequence[str] = ()) -> None:
        self.names = tuple(names)
        listed = ", ".join(f"`{n}`" for n in self.names)
        noun = "field" if len(self.names) == 1 else "fields"
        message = f"missing required input {noun}: {listed}"
        unknown = list(given)
        guesses = [
            f"`{g}` was given: did you mean `{n}`"
            for n in self.names
            for g in difflib.get_close_matches(n, unknown, n=1, cutoff=0.6)
        ]
        if guesses:
            message += f" ({'; '.join(guesses)}?)"
        elif unknown:
            message += f" (given instead: {', '.join(f'`{g}`' for g in sorted(unknown))})"
        super().__init__(message)


EXCERPT_CHARS = 240
"""How much of a reply a parse error quotes: enough to see what the model did, never a whole page."""


def reply_excerpt(completion: str | Mapping[str, Any] | None, limit: int = EXCERPT_CHARS) -> str | None:
    """A short, redacted, one-line quotation of what the model wrote (None when it wrote nothing).

    The middle of a long reply is left out, saying how much: the start shows how the model began,
    the end whether it was cut off.
    """
    if completion is None:
        return None
    text = completion if isinstance(completion, str) else json.dumps(completion, ensure_ascii=False, default=str)
    if not text.strip():
        return None
    text = redact_text(text)
    if len(text) > limit:
        head = limit * 2 // 3
        tail = limit - head
        return f"{text[:head]!r} [... {len(text) - limit:,} characters left out ...] {text[-tail:]!r}"
    return repr(text)


class MediaRefused(ImpError, ValueError):
    """A media value the provider or model cannot take (its kind, type, size or source), refused
    before sending. The message names where the value stands (the input `photo`, a tool's result),
    the provider, and the limit; the value itself shows only as its short description."""

    def __init__(self, reason: str, *, provider: str, origin: str | None = None, media: object = None) -> None:
        self.reason = reason
        self.provider = provider
        self.origin = origin
        self.media = media
        where = f"{origin}: " if origin else ""
        super().__init__(f"{where}{reason}")


class AdapterParseError(ImpError):
    """A reply that could not be read into the signature's output fields.

    The message names the adapter, what was wrong, and a short redacted excerpt of the reply; when
    a program asked again with the JSON fallback, it says so, how that request was sent (a
    `response_format` the server refused and imp stepped down from), and why that reply failed too.
    """

    def __init__(
        self,
        message: str,
        *,
        adapter: str,
        fields: Sequence[str] = (),
        completion: str | Mapping[str, Any] | None = None,
        parsed: Mapping[str, Any] | None = None,
        value: object = None,
        reason: str | None = None,
        finish_reason: str | None = None,
    ) -> None:
        self.adapter = adapter
        self.fields = tuple(fields)
        self.completion = completion
        self.parsed = dict(parsed or {})
        self.value = value
        self.reason = reason or message
        self._message = message
        self.finish_reason = finish_reason
        """The reply's normalised finish reason, when the code that read it knew it (`length`: cut)."""
        self.fallback: AdapterParseError | None = None
        """The JSON fallback's own parse error, when a program asked again and that reply failed too."""
        self.fallback_request: str | None = None
        """How the fallback request was sent: its adapter, and its `response_format` (stepped down or not)."""
        super().__init__(self._text())

    @property
    def message(self) -> str:
        """What was wrong with the reply, without the adapter's name, the excerpt or the fallback."""
        return self._message

    @property
    def adapters_tried(self) -> tuple[str, ...]:
        """The adapters that read a reply, in order: this one, then the fallback's, if it was asked."""
        return (self.adapter,) if self.fallback is None else (self.adapter, *self.fallback.adapters_tried)

    def _own_text(self) -> str:
        text = self._message.rstrip(". ")
        if isinstance(self.completion, str) and not self.completion.strip():
            # A base model served for chat (Gemma 3 270M under llama-cpp-python) mostly answers ''.
            text += " (the reply was empty: the model wrote no text)"
        else:
            excerpt = reply_excerpt(self.completion)
            if excerpt is not None:
                text += f"; the model wrote {excerpt}"
        if self.finish_reason == "length":
            text += " (the reply was cut off at the max_tokens limit, finish_reason 'length': raise max_tokens)"
        return text

    def _text(self) -> str:
        text = f"{self.adapter} could not parse the reply: {self._own_text()}"
        if self.fallback is not None:
            how = f" ({self.fallback_request})" if self.fallback_request else ""
            text += (
                f". Asked again with the JSON fallback{how}, {self.fallback.adapter} could not parse "
                f"that reply either: {self.fallback._own_text()}"
            )
        return text

    def with_finish_reason(self, finish_reason: str | None) -> AdapterParseError:
        """This error, saying how the reply ended (a reply cut by `max_tokens` says so); returns self."""
        self.finish_reason = finish_reason
        self.args = (self._text(),)
        return self

    def with_fallback(self, error: AdapterParseError, request: str | None = None) -> AdapterParseError:
        """This error, saying the JSON fallback was asked (`request`: how it was sent) and failed with `error`; returns self."""
        self.fallback = error
        self.fallback_request = request
        self.args = (self._text(),)
        return self


class DeadlineExceeded(ImpError, TimeoutError):
    """The current `imp.deadline` passed before the work finished."""


class ReActStepError(ImpError):
    """The last request of a ReAct turn failed; carries the history recorded so far."""

    def __init__(self, message: str, *, history: object, cause: BaseException | None = None) -> None:
        # Typed `Any` so that this bottom module imports nothing above `imp.records`.
        self.history = history
        """The turn's `imp.History` up to the failure."""
        self.cause = cause
        super().__init__(message)


class ResumeError(ImpError, ValueError):
    """Decisions that cannot resume a paused turn: a call without a decision, a decision for a call that
    is not pending, a tool the program does not hold, approved arguments that do not fit the tool's
    schema. Raised before anything runs."""

    def __init__(self, message: str, *, undecided: Sequence[str] = ()) -> None:
        self.undecided = tuple(undecided)
        """The ids of the pending calls that got no decision."""
        super().__init__(message)


class Retry(ImpError):
    """Raised by a validator (`validate=`) to refuse an answer: the model reads `reason` and answers again."""

    def __init__(self, reason: str) -> None:
        self.reason = str(reason)
        super().__init__(self.reason)


class ValidationFailed(ImpError):
    """Every attempt a program's `max_retries` allowed was refused (by its validator, or unreadable).

    `attempts` holds each one in order: a mapping with `outputs` (None when the reply could not be
    read), `reply` (the reply's text, when there was one) and `reason` (why it was refused).
    """

    def __init__(self, message: str, *, attempts: Sequence[Mapping[str, Any]]) -> None:
        self.attempts = tuple(dict(a) for a in attempts)
        self.history: Any = None
        """A tool loop's history up to the failure (None for a single request)."""
        super().__init__(message)


class InvalidInputError(ImpError, ValueError):
    """An input value that does not fit its field (None for a required one, a wrong type, a broken
    constraint); raised before any LM call. The message names the field and the value's type, never
    the value itself (it may be a secret)."""

    def __init__(self, field: str, reason: str, *, value: object = None) -> None:
        self.field = field
        self.reason = reason
        self.value = value
        super().__init__(f"input field `{field}`: {reason}")


_OUTCOMES = frozenset(get_args(ToolOutcome))


class ToolError(ImpError):
    """Raised by a tool to report a failure in its own words, with the outcome it knows.

    The message becomes the sentence the model reads after "Error: ". The default outcome is
    `"result"` (the tool answered, with an error of its own); a tool that knows nothing was done
    can say `"refused"` or `"not_sent"`, and one whose credential was refused `"auth_refused"`.
    Any other exception a tool raises is recorded as `"unknown"`: it may have had an effect.
    """

    def __init__(self, message: str, *, outcome: ToolOutcome = "result") -> None:
        if outcome not in _OUTCOMES:
            raise ValueError(f"unknown tool outcome {outcome!r}")
        self.message = message
        self.outcome: ToolOutcome = outcome
        super().__init__(message)


_FLAGS = ("retryable", "context_window_exceeded", "content_filtered", "tool_choice_unsupported")


class LMError(ImpError):
    """A failed LM request, keeping the provider's status and (redacted) body.

    `LMError(...)` called directly builds the subclass its arguments name (see `lm_error_kind`);
    a subclass called directly is that kind, and a flag that contradicts it is refused.
    """

    is_retryable: ClassVar[bool] = False
    """Whether this kind of failure may succeed if the same request is sent again."""

    def __new__(cls, message: str = "", *args: Any, **kwargs: Any) -> LMError:
        kind = (
            lm_error_kind(**{k: kwargs[k] for k in ("status", "code", *_FLAGS) if k in kwargs})
            if cls is LMError
            else cls
        )
        return super().__new__(kind, message)

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        provider: str | None = None,
        code: str | None = None,
        body: object = None,
        retryable: bool | None = None,
        retry_after: float | None = None,
        context_window_exceeded: bool | None = None,
        content_filtered: bool | None = None,
        tool_choice_unsupported: bool | None = None,
        request_id: str | None = None,
        attempts: int = 1,
        url: str | None = None,
    ) -> None:
        given = {
            "retryable": retryable,
            "context_window_exceeded": context_window_exceeded,
            "content_filtered": content_filtered,
            "tool_choice_unsupported": tool_choice_unsupported,
        }
        for flag, value in given.items():
            if value is not None and bool(value) != getattr(self, flag):
                raise ValueError(
                    f"{flag}={value!r} contradicts {type(self).__name__} (status={status!r}): leave the flag out, "
                    "or raise the kind you mean (imp.RateLimited, imp.BadRequest, imp.ContextWindowExceeded, ...)"
                )
        self.message = message
        self.status = status
        self.provider = provider
        self.code = code
        self.body = body
        self.retry_after = retry_after
        self.request_id = request_id
        self.url = url
        """The URL the request went to, without credentials (set for connection failures and 404s)."""
        self.attempts = attempts
        """How many requests were made before this error was raised (retries included)."""
        self.history: Any = None
        """The `imp.History` recorded so far, when the failure ended a ReAct turn (set by the loop)."""
        where = f"{provider} " if provider else ""
        status_text = f"{status} " if status is not None else ""
        super().__init__(f"{where}{status_text}{message}".strip())

    @property
    def retryable(self) -> bool:
        """Whether sending the same request again may succeed (the kind's `is_retryable`)."""
        return type(self).is_retryable

    @property
    def context_window_exceeded(self) -> bool:
        """Whether this is a `ContextWindowExceeded`."""
        return isinstance(self, ContextWindowExceeded)

    @property
    def content_filtered(self) -> bool:
        """Whether this is a `ContentFiltered`."""
        return isinstance(self, ContentFiltered)

    @property
    def tool_choice_unsupported(self) -> bool:
        """Whether this is a `ToolChoiceUnsupported`."""
        return isinstance(self, ToolChoiceUnsupported)


class ConnectionFailed(LMError):
    """No (whole) response came: connection refused, DNS failure, timeout or reset."""

    is_retryable = True


class StreamBroken(LMError):
    """A streamed response was cut off after it started (reset, or no terminal event)."""

    is_retryable = True


class ProviderUnavailable(LMError):
    """The provider could not answer now: a 5xx, 408, 425, or 529 / `overloaded_error`."""

    is_retryable = True


class RateLimited(LMError):
    """A 429 throttle; `retry_after` holds the provider's wait hint when it gave one."""

    is_retryable = True


class QuotaExceeded(LMError):
    """The account's quota, credit or spend limit is used up (402, or a 429 that says so)."""


class AuthenticationError(LMError):
    """The credential was refused or lacks permission (401, 403)."""


class ContentFiltered(LMError):
    """The provider's content filter stopped the completion (it was billed all the same)."""


class InvalidResponse(LMError):
    """A successful status whose body is not a completion (not JSON, no choices)."""


class ResponseTooLarge(InvalidResponse):
    """A reply larger than the client's `max_response_bytes` (`limit`): a whole body, a stream's content,
    or one event of a stream. Reading stops there; sending the same request again would not help."""

    limit: int = 0

    def __init__(self, message: str, *, limit: int = 0, **details: Any) -> None:
        super().__init__(message, **details)
        self.limit = limit


class BadRequest(LMError):
    """The provider refused the request itself (a 4xx or a validation failure): resending cannot help."""


class NotFound(BadRequest):
    """404: the URL or the model name is wrong (`url` names where the request went)."""


class ContextWindowExceeded(BadRequest):
    """The prompt (with `max_tokens`) does not fit the model's context window."""


class UnsupportedOption(BadRequest):
    """The server refuses a request option (`option` names it: `response_format`, `tool_choice`,
    `parallel_tool_calls`, `stream_options`); an OpenAI-compatible client steps down from it."""

    option: str = ""

    def __init__(self, message: str, *, option: str | None = None, **details: Any) -> None:
        super().__init__(message, **details)
        if option is not None:
            self.option = option


class ToolChoiceUnsupported(UnsupportedOption):
    """The server refuses a named or required `tool_choice` (only `auto`, or none at all)."""

    option = "tool_choice"


_BY_STATUS: dict[int, type[LMError]] = {
    401: AuthenticationError,
    402: QuotaExceeded,
    403: AuthenticationError,
    404: NotFound,
    408: ProviderUnavailable,
    425: ProviderUnavailable,
    429: RateLimited,
    500: ProviderUnavailable,
    502: ProviderUnavailable,
    503: ProviderUnavailable,
    504: ProviderUnavailable,
    529: ProviderUnavailable,
}


QUOTA_CODES = frozenset(
    {"insufficient_quota", "enforced_spend_limit_reached", "billing_error", "billing_hard_limit_reached"}
)
"""Provider error codes that mean the account's quota or spend limit is used up (OpenAI, Anthropic)."""


def lm_error_kind(
    status: int | None = None,
    *,
    code: str | None = None,
    retryable: bool | None = None,
    context_window_exceeded: bool | None = None,
    content_filtered: bool | None = None,
    tool_choice_unsupported: bool | None = None,
) -> type[LMError]:
    """The `LMError` subclass for a status, a provider code and the old flags (what `LMError(...)` builds)."""
    if context_window_exceeded:
        return ContextWindowExceeded
    if tool_choice_unsupported:
        return ToolChoiceUnsupported
    if content_filtered:
        return ContentFiltered
    if code in QUOTA_CODES:
        return QuotaExceeded
    if status is not None:
        kind = _BY_STATUS.get(status)
        if kind is None and 400 <= status < 500:
            kind = BadRequest
        if kind is not None:
            return kind
    return ProviderUnavailable if retryable else LMError
