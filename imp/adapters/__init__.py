"""Adapters: message assembly shared by every dialect, then one module per dialect."""

from imp.adapters._names import ADAPTER_NAMES, as_adapter
from imp.adapters.base import FORMAT_OPTIONS, Adapter, FormatOptions
from imp.adapters.chat import ChatAdapter
from imp.adapters.json import JSONAdapter
from imp.adapters.xml import XMLAdapter

__all__ = [
    "ADAPTER_NAMES",
    "FORMAT_OPTIONS",
    "Adapter",
    "ChatAdapter",
    "FormatOptions",
    "JSONAdapter",
    "XMLAdapter",
    "as_adapter",
]
