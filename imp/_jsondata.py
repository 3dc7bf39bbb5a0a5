"""The shape of JSON data, for the records imp writes and reads as JSON (saved programs, reports,
checkpoints, schemas, descriptors): a value is one of JSON's six kinds, nested.

A reader narrows what it reads (`isinstance(value, dict)`) before it uses it, as it must with data
from a file or a server; a writer gets its values checked as JSON-shaped. Below everything else.
"""

from __future__ import annotations

__all__ = ["JSONArray", "JSONObject", "JSONValue"]

type JSONValue = bool | int | float | str | list[JSONValue] | dict[str, JSONValue] | None
"""A JSON value as `json.loads` returns it."""

type JSONObject = dict[str, JSONValue]
"""A JSON object as `json.loads` returns it."""

type JSONArray = list[JSONValue]
"""A JSON array as `json.loads` returns it."""
