"""Adapters: message assembly shared by every dialect, then one module per dialect."""

from imp.adapters._names import ADAPTER_NAMES, as_adapter
from imp.adapters.base import FORMAT_OPTIONS, Adapter, FormatOptions
from imp.adapters.chat import ChatAdapter
from imp.adapters.json import JSONAdapter
from imp.adapters.template import TemplateAdapter, TemplateError, TemplateMessage, Turns, assistant, system, turns, user
from imp.adapters.xml import XMLAdapter

__all__ = [
    "ADAPTER_NAMES",
    "Adapter",
    "ChatAdapter",
    "FORMAT_OPTIONS",
    "FormatOptions",
    "JSONAdapter",
    "TemplateAdapter",
    "TemplateError",
    "TemplateMessage",
    "Turns",
    "XMLAdapter",
    "as_adapter",
    "assistant",
    "system",
    "turns",
    "user",
]
