"""The saved file: format, schema version, checksum, the secret scan, atomic 0600 writes."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from imp._json import loads_strict
from imp._jsondata import JSONObject, JSONValue
from imp._redact import redact_text
from imp.errors import ImpError
from imp.media import MEDIA_KEY
from imp.models.base import LM
from imp.programs._parameters import Optimized, optimized_by, set_optimized
from imp.programs.base import Program
from imp.runtime.logging import get_logger
from imp.saving._codec import ChecksumError, Loader, LoadError, Saver

__all__ = ["FORMAT", "SCHEMA_VERSION", "dump_program", "load", "load_program", "save"]

FORMAT = "imp.program"
SCHEMA_VERSION = 1


def _canonical(document: Mapping[str, object]) -> bytes:
    body = {k: v for k, v in document.items() if k != "checksum"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _redacted(value: JSONValue, where: str, found: list[str]) -> JSONValue:
    """The payload with every text redacted by value shape (as logs are); `found` gets the places."""
    if isinstance(value, str):
        shown = redact_text(value)
        if shown != value:
            found.append(where)
        return shown
    if isinstance(value, Mapping):
        if MEDIA_KEY in value:  # its base64 is bytes, not text to search for secret shapes; its URL is text
            url = value.get("url")
            return {**value, "url": _redacted(url, f"{where}.url", found)} if isinstance(url, str) else value
        return {k: _redacted(v, f"{where}.{k}", found) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v, f"{where}[{i}]", found) for i, v in enumerate(value)]
    return value


def _checksum(document: Mapping[str, object]) -> str:
    return "sha256:" + hashlib.sha256(_canonical(document)).hexdigest()


def dump_program(
    program: Program, *, registry: Mapping[str, object] | None = None, include_lm: bool = True
) -> JSONObject:
    """The document `imp.save` writes, as a dict (format, schema version, program, checksum)."""
    if not isinstance(program, Program):
        raise TypeError(f"imp.save saves an imp program, got {type(program).__name__}")
    redacted: list[str] = []
    payload = _redacted(Saver(registry, include_lm=include_lm).program(program), "program", redacted)
    if redacted:
        get_logger().warning("imp.save.redacted", where=redacted[:10], count=len(redacted))
    document: JSONObject = {"format": FORMAT, "schema_version": SCHEMA_VERSION, "program": payload}
    made_by = optimized_by(program)
    if made_by is not None:  # which optimizer made the program, with what score
        document["optimized"] = _redacted(made_by.dump(), "optimized", [])
    document["checksum"] = _checksum(document)
    return document


_DOCUMENT_KEYS = frozenset({"format", "schema_version", "program", "checksum", "optimized"})


def load_program(
    document: Mapping[str, object],
    *,
    registry: Mapping[str, object] | None = None,
    lm: LM | None = None,
    trust_endpoint: bool | str | Iterable[str] = False,
) -> Program:
    """A program from a document `dump_program` made; checks the format, schema version and checksum,
    and what the file asks for (see `imp.saving._trust`: a loaded file is data, never authority)."""
    if not isinstance(document, Mapping) or document.get("format") != FORMAT:
        raise LoadError(f"not a saved imp program (expected a JSON object with format {FORMAT!r})")
    version = document.get("schema_version")
    if version != SCHEMA_VERSION:
        raise LoadError(f"saved with schema version {version!r}; this imp reads schema version {SCHEMA_VERSION}")
    if document.get("checksum") != _checksum(document):
        raise ChecksumError(
            "the saved program does not match its checksum: it was changed after imp.save wrote it "
            "(edited by hand, or damaged). Change the program in code and save it again"
        )
    program = document.get("program")
    if not isinstance(program, Mapping):
        raise LoadError("the saved document has no program")
    loader = Loader(registry, lm=lm, trust_endpoint=trust_endpoint)
    loader.fields(document, _DOCUMENT_KEYS, "the saved document")
    try:
        loaded = loader.program(program)
        made_by = document.get("optimized")
        if isinstance(made_by, Mapping):
            set_optimized(loaded, Optimized.load(made_by))
    except ImpError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        # A file is data from anywhere: whatever a malformed one makes a constructor say, the caller
        # gets the one error of loading, with the cause.
        detail = f"a missing key {exc}" if isinstance(exc, KeyError) else str(exc)
        raise LoadError(f"the saved program could not be loaded: {detail}") from exc
    return loaded


def _write_atomic(path: Path, text: str) -> None:
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        # Said here, or the error would name the temporary file, which the caller never wrote.
        raise FileNotFoundError(
            errno.ENOENT, f"cannot save to {path}: the folder {directory} does not exist (create it first)", str(path)
        )
    fd, temp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")  # created with mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, 0o600)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


def save(
    program: Program,
    path: str | os.PathLike[str],
    *,
    registry: Mapping[str, object] | None = None,
    include_lm: bool = True,
) -> Path:
    """Write a program to `path` as checksummed JSON (atomically, mode 0600); returns the path.

    Functions in `adapter_opts` are saved by their `registry` name (else their qualified name);
    `include_lm=False` leaves the model out (pass `lm=` to `imp.load`).
    """
    document = dump_program(program, registry=registry, include_lm=include_lm)
    target = Path(path)
    _write_atomic(target, json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    return target


def load(
    path: str | os.PathLike[str],
    *,
    registry: Mapping[str, object] | None = None,
    lm: LM | None = None,
    trust_endpoint: bool | str | Iterable[str] = False,
) -> Program:
    """Read a program `imp.save` wrote; `registry` resolves saved function and type names, `lm` overrides the model.

    A file is data, never authority: it cannot name code, a path to create or a credential, and an
    endpoint it names other than its provider's own is refused unless `trust_endpoint` is True or
    that URL (or a list of URLs holding it): your API key from the environment would be sent there.
    """
    target = Path(path)
    try:
        document = loads_strict(target.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise LoadError(f"{target} is not JSON ({exc}); was it written by imp.save?") from None
    try:
        return load_program(document, registry=registry, lm=lm, trust_endpoint=trust_endpoint)
    except ChecksumError as exc:
        raise ChecksumError(f"{target}: {exc}") from None
