"""Lenient JSON: the one reader of model-written JSON, for every layer, in bounded time.

Models write JSON with Python spellings, trailing commas, code fences and cut-off ends. Every
place imp reads such text (field values, tool arguments, wire payloads, adapter replies) goes
through `loads`, so all of them accept the same inputs and fail the same way: a `ValueError`
whose message starts with "not JSON".

A reply may be written by an attacker, so reading one is bounded (`ParseLimits`): text longer
than `max_chars` or nested deeper than `max_depth` is refused before it is parsed (the standard
library's decoder recurses, and raises `RecursionError` a few thousand levels down), and the
repair is one pass over the text with an explicit stack. json-repair, which imp used before,
took 0.9 s on 500 characters of `{` and grows with the square of the length; this reader's work
grows with the length alone (`tests/test_parse_limits.py` counts it; `benchmarks/parse_limits.py`
times it).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

__all__ = [
    "OverLimit",
    "ParseLimits",
    "check_size",
    "check_size_and_depth",
    "find_object",
    "limits",
    "loads",
    "loads_object",
    "loads_strict",
    "unwrap_fence",
    "use_limits",
]


@dataclass(frozen=True, slots=True)
class ParseLimits:
    """How much imp reads of text a model or a server wrote (JSON, XML, tool arguments).

    `max_chars` is the longest text parsed as one value (4,000,000 characters: a few MB, far above
    real replies); `max_depth` the deepest nesting of objects and lists (100; real tool arguments
    and outputs stay under 20); `max_repair_chars` the longest text that is repaired when it is not
    JSON as written (8,000 characters: the repair runs in Python on the event loop, about a
    microsecond a character on a quiet machine, so the longest repair holds the loop ~10 ms; valid
    JSON of any size up to `max_chars` is read by the standard library's C decoder). Set them for
    the process with `imp.configure(parse_limits=...)`.
    """

    max_chars: int = 4_000_000
    max_depth: int = 100
    max_repair_chars: int = 8_000

    def __post_init__(self) -> None:
        for name in ("max_chars", "max_depth", "max_repair_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"ParseLimits.{name} is a positive integer, got {value!r}")


class OverLimit(ValueError):
    """Text refused by a parse limit (too long, nested too deep): its message names the setting."""


_limits = ParseLimits()


def limits() -> ParseLimits:
    """The parse limits in force for this process."""
    return _limits


def use_limits(new: ParseLimits) -> None:
    """Set the process's parse limits (what `imp.configure(parse_limits=...)` calls)."""
    global _limits
    if not isinstance(new, ParseLimits):
        raise TypeError(f"parse_limits takes an imp.ParseLimits, got {type(new).__name__}")
    _limits = new


_FENCE = re.compile(r"\A\s*```[A-Za-z0-9_-]*[ \t]*\n?(.*?)\n?```\s*\Z", re.DOTALL)
_DQ_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"?', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]++")
_STEP = {"{": 1, "[": 1, "}": -1, "]": -1}


def unwrap_fence(text: str) -> str:
    """The body of a fenced ```json ... ``` block, or the text as it is."""
    match = _FENCE.match(text)
    return match.group(1) if match else text


def check_size(text: str, what: str = "JSON") -> None:
    """Refuse text longer than `max_chars` (`OverLimit`, naming the setting)."""
    if len(text) > _limits.max_chars:
        raise OverLimit(
            f"not {what}: {len(text):,} characters, over the limit of {_limits.max_chars:,} "
            "(imp.ParseLimits.max_chars, set with imp.configure(parse_limits=...))"
        )


def check_size_and_depth(text: str, what: str = "JSON") -> None:
    """Refuse text longer than `max_chars`, or whose brackets nest deeper than `max_depth`.

    Brackets inside double-quoted strings do not count. Linear in the text; a text with fewer
    opening brackets than the depth limit (nearly every reply) is passed after two counts.

    Raises:
        OverLimit: "not JSON: ..." naming the limit and the setting that changes it.
    """
    check_size(text, what)
    bound = _limits
    if len(text) <= bound.max_depth or text.count("{") + text.count("[") <= bound.max_depth:
        return
    brackets = _NOT_BRACKET.sub("", _DQ_STRING.sub("", text))
    if brackets and max(accumulate(map(_STEP.__getitem__, brackets))) > bound.max_depth:
        raise OverLimit(_too_deep(what))


def _too_deep(what: str) -> str:
    return (
        f"not {what}: nested deeper than {_limits.max_depth} levels "
        "(imp.ParseLimits.max_depth, set with imp.configure(parse_limits=...))"
    )


def _text(text: str | bytes | bytearray) -> str:
    if isinstance(text, bytes | bytearray):
        return bytes(text).decode("utf-8", errors="replace")
    return text


def loads_strict(text: str | bytes | bytearray) -> Any:
    """Decode standard JSON (no repair) within the parse limits: for what a server sends.

    Raises:
        ValueError: "not JSON: ..." for text that is not JSON, too long or nested too deep.
    """
    body = _text(text)
    check_size_and_depth(body)
    try:
        return json.loads(body)
    except RecursionError:  # unreachable after the depth check; kept so no reply can raise it
        raise OverLimit(_too_deep("JSON")) from None
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None


def loads(text: str | bytes | bytearray) -> Any:
    """Decode JSON, repairing what can be repaired (Python-dict spelling, trailing commas, fences,
    comments, unquoted keys, cut-off ends), within the parse limits.

    Raises:
        ValueError: "not JSON: ..." when the text is blank, over a limit, or holds no object or
            array to repair.
    """
    body = unwrap_fence(_text(text)).strip()
    if not body:
        raise ValueError("not JSON: the text is blank")
    check_size_and_depth(body)
    try:
        return json.loads(body)
    except RecursionError:
        raise OverLimit(_too_deep("JSON")) from None
    except ValueError:
        pass
    if len(body) > _limits.max_repair_chars:
        raise OverLimit(
            f"not JSON as written, and {len(body):,} characters is over the {_limits.max_repair_chars:,} imp repairs "
            "(imp.ParseLimits.max_repair_chars, set with imp.configure(parse_limits=...))"
        )
    return _repair(body)


def loads_object(text: str | bytes | bytearray) -> dict[str, Any]:
    """Decode a JSON object (repairing it).

    Raises:
        ValueError: "not JSON ..." as `loads` does, or "not a JSON object" for another value.
    """
    value = loads(text)
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value


_BRACE_TOKEN = re.compile(r'"(?:[^"\\]++|\\.)*+"?|[{}]', re.DOTALL)


def find_object(text: str) -> str | None:
    """The first balanced `{...}` block in text (braces inside strings ignored), or None.

    One pass: an opening brace that never closes does not make the rest be read again.
    """
    opened: list[int] = []
    found: tuple[int, int] | None = None
    for match in _BRACE_TOKEN.finditer(text):
        token = match.group()
        if token == "{":
            opened.append(match.start())
        elif token == "}":
            if not opened:
                continue
            start = opened.pop()
            if not opened:
                return text[start : match.end()]
            if found is None or start < found[0]:
                found = (start, match.end())
    return None if found is None else text[found[0] : found[1]]


# --- the repair: one pass, an explicit stack -------------------------------------------------

_OPENER = re.compile(r"[\[{]")
_NUMBER = re.compile(r"[-+]?(?:\d++\.?\d*+|\.\d++)(?:[eE][-+]?\d++)?\Z")
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "/": "/"}
_WORDS: dict[str, Any] = {
    "true": True,
    "True": True,
    "false": False,
    "False": False,
    "null": None,
    "None": None,
    "NaN": math.nan,
    "Infinity": math.inf,
    "-Infinity": -math.inf,
}
_NO_KEY = object()


def _unescape(body: str) -> str:
    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        if len(code) == 5:
            return chr(int(code[1:], 16))
        return _ESCAPES.get(code, code)

    return _ESCAPE.sub(one, body)


def _string(body: str, quote: str) -> str:
    if quote == '"' and "\\" in body:
        try:
            decoded: str = json.loads(f'"{body}"', strict=False)
        except ValueError:
            return _unescape(body)
        return decoded
    return _unescape(body) if "\\" in body else body


def _bare(text: str) -> object:
    """Unquoted text: a JSON or Python literal, a number, else the text itself."""
    if text in _WORDS:
        return _WORDS[text]
    if text.isdigit() and text.isascii():
        return int(text)
    if _NUMBER.match(text):
        try:
            return float(text) if any(c in text for c in ".eE") else int(text)
        except ValueError:  # more digits than int() reads
            return text
    return text


# One pattern for every token, so the loop below makes one regex call per token: a comment or
# whitespace run, an opener, a closer, a separator, a string in either quote (its closing quote
# optional: a cut-off string ends the text), or a bare run up to a delimiter or a comment.
_TOKEN = re.compile(
    r"""(?P<space>(?:\s++|//[^\n]*+|/\*(?:[^*]++|\*(?!/))*+(?:\*/)?)++)"""
    r"""|(?P<open>[\[{])|(?P<close>[\]}])|(?P<sep>[,:])"""
    r"""|"(?P<dq>(?:[^"\\]++|\\.)*+)\\?(?P<dq_end>"?)"""
    r"""|'(?P<sq>(?:[^'\\]++|\\.)*+)\\?(?P<sq_end>'?)"""
    r"""|(?P<bare>(?:[^,:{}\[\]"'\n/]++|/(?![/*]))++)""",
    re.DOTALL,
)


def _repair(text: str) -> object:
    """The first object or array in text, read leniently in one pass (see the module docstring)."""
    first = _OPENER.search(text)
    if first is None:
        raise ValueError(f"not JSON: no object or array in {text[:60]!r}")
    max_depth = _limits.max_depth
    root: Any = None
    stack: list[Any] = []
    keys: list[Any] = []  # per open object: the key waiting for its value (_NO_KEY when none)
    for token in _TOKEN.finditer(text, first.start()):
        kind = token.lastgroup
        if kind == "space" or kind == "sep":
            continue
        if kind == "open":
            if len(stack) >= max_depth:
                raise OverLimit(_too_deep("JSON"))
            made: Any = {} if token.group() == "{" else []
            if stack:
                _put(stack, keys, made)
            else:
                root = made
            stack.append(made)
            keys.append(_NO_KEY)
            continue
        if kind == "close":
            closes = dict if token.group() == "}" else list
            for i in range(len(stack) - 1, -1, -1):  # the innermost of this kind; a stray one is skipped
                if type(stack[i]) is closes:
                    _close(stack, keys, i)
                    break
            if not stack:
                return root
            continue
        if kind == "dq_end":
            value: Any = _string(token.group("dq"), '"')
        elif kind == "sq_end":
            value = _string(token.group("sq"), "'")
        else:
            value = _bare(token.group().strip())
        top = stack[-1]
        if type(top) is list:
            top.append(value)
        elif keys[-1] is _NO_KEY:
            keys[-1] = value if kind != "bare" or isinstance(value, str) else _key_text(value)
        else:
            top[keys[-1]] = value
            keys[-1] = _NO_KEY
    _close(stack, keys, 0)  # cut off: close what is open
    return root


def _key_text(value: object) -> str:
    """A bare key's text (`{1: "a"}` has the key "1")."""
    return json.dumps(value) if value is None or isinstance(value, bool) else str(value)


def _put(stack: list[Any], keys: list[Any], value: object) -> None:
    top = stack[-1]
    if isinstance(top, list):
        top.append(value)
    elif keys[-1] is not _NO_KEY:
        top[keys[-1]] = value
        keys[-1] = _NO_KEY
    # an object or array where an object's key belongs is read and dropped


def _close(stack: list[Any], keys: list[Any], index: int) -> None:
    """Close the containers from `index` up; a key left without a value gets ""."""
    for i in range(index, len(stack)):
        if keys[i] is not _NO_KEY and isinstance(stack[i], dict):
            stack[i].setdefault(keys[i], "")
    del stack[index:]
    del keys[index:]
