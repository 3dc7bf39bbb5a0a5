"""Adapters: message assembly shared by every dialect, then one module per dialect."""

from imp.adapters.base import FORMAT_OPTIONS, Adapter, FormatOptions
from imp.adapters.chat import ChatAdapter
from imp.adapters.json import JSONAdapter
from imp.adapters.xml import XMLAdapter

__all__ = [
    "FORMAT_OPTIONS",
    "Adapter",
    "ChatAdapter",
    "FormatOptions",
    "JSONAdapter",
    "XMLAdapter",
]
