"""Adapters: message assembly shared by every dialect, then one module per dialect."""

from imp.adapters._names import ADAPTER_NAMES, as_adapter
from imp.adapters._registry import SavedAdapter, load_adapter, saved_adapter, saved_names
from imp.adapters.base import FORMAT_OPTIONS, Adapter, FormatOptions, Guidance
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
    "Guidance",
    "JSONAdapter",
    "SavedAdapter",
    "TemplateAdapter",
    "TemplateError",
    "TemplateMessage",
    "Turns",
    "XMLAdapter",
    "as_adapter",
    "assistant",
    "load_adapter",
    "saved_adapter",
    "saved_names",
    "system",
    "turns",
    "user",
]
