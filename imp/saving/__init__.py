"""`imp.save` / `imp.load`: programs as checksummed JSON, without credentials, functions saved by name.

A saved file passes the same secret scan as logs: credentials and headers are dropped by key
name, and every text in it (demos, instructions, descriptions) is redacted by value shape.

A program kind (Predict, ChainOfThought, ReAct, ReActTrajectory) registers a `ProgramKind` with a dump and
a load function; `Saver` and `Loader` give those functions the shared rules: JSON-safe values,
credentials and headers dropped, functions written as names and resolved from the registry.

Rooms: `_codec` (the shared rules: values, functions and tools by name, LMs, adapters, the kinds'
registry, the errors), `_kinds` (each program kind's dump and load), `_file` (the document, its
checksum and secret scan, the atomic write).
"""

from imp.saving import _kinds  # noqa: F401  (registers the program kinds)
from imp.saving._codec import (
    ChecksumError,
    Loader,
    LoadError,
    ProgramKind,
    SaveError,
    Saver,
    register_program_kind,
)
from imp.saving._file import FORMAT, SCHEMA_VERSION, dump_program, load, load_program, save

__all__ = [
    "FORMAT",
    "SCHEMA_VERSION",
    "ChecksumError",
    "LoadError",
    "Loader",
    "ProgramKind",
    "SaveError",
    "Saver",
    "dump_program",
    "load",
    "load_program",
    "register_program_kind",
    "save",
]
