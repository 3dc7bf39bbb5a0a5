"""Media a signature takes as inputs: `imp.Image`, `imp.Audio` and `imp.File` (PDFs and other documents).

A media value holds its bytes, read once when you ask (`from_path`, `from_bytes`,
`from_data_uri`), or a URL (`from_url`: sent as a URL where the provider takes one; imp never
downloads it unless `await media.fetch()` asks). It is immutable and compares by content. Wherever
a person may read it (a repr, a log line, an event, an error, `inspect_history`, a span, the run's
page) it is a short description: its kind, media type, size and the first digits of its SHA-256,
never its bytes. Each client writes it into a request in its provider's own shape.

Bottom layer: it imports nothing of imp but `_sniff` and `_redact`, so records, values and the
adapters can all name these types.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import itertools
import re
import secrets
import typing
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal, Self
from urllib.parse import unquote, urlsplit

from imp._redact import redact_text
from imp._sniff import normal_media_type, sniff, type_from_name

__all__ = [
    "MEDIA_CLASSES",
    "MEDIA_KEY",
    "Audio",
    "File",
    "Image",
    "Media",
    "MediaKind",
    "describe_size",
    "is_media",
    "media_in",
    "markers_alive",
    "media_marker",
    "resolve_marker",
    "shorten_base64",
    "MARKER",
    "MARKER_PREFIX",
]

MediaKind = Literal["image", "audio", "file"]
"""What a media value is: an image, audio, or a document (`imp.File`)."""

MEDIA_KEY = "$media"
"""The key a saved media value is written under (its value is the kind)."""

_DATA_URI = re.compile(r"data:(?P<type>[^;,]*)(?P<params>(?:;[^;,]*)*),", re.IGNORECASE)
_FETCH_LIMIT = 50 * 1024 * 1024


_BASE64_RUN = re.compile(r"(?:data:[\w.+-]+/[\w.+-]+;base64,)?[A-Za-z0-9+/]{200,}={0,2}")


def shorten_base64(value: object) -> Any:
    """Text (or a JSON-like value) with each run of 200 or more base64 characters, as a provider may
    echo a request's media in an error, replaced by `[base64: N chars]`."""
    if isinstance(value, str):
        if len(value) < 200:
            return value
        return _BASE64_RUN.sub(lambda m: f"[base64: {len(m.group(0))} chars]", value)
    if isinstance(value, Mapping):
        return {k: shorten_base64(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shorten_base64(v) for v in value]
    return value


def describe_size(size: int) -> str:
    """A byte count as people read it: `512 B`, `12.3 KB`, `5.0 MB`."""
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def _shown_url(url: str) -> str:
    """A URL as it may be shown: no credentials, no query or fragment (signed URLs carry tokens there)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    tail = "?..." if parts.query or parts.fragment else ""
    return redact_text(f"{parts.scheme}://{host}{parts.path}{tail}")


class Media:
    """An image, audio clip or document: bytes with a media type, or a URL. Use `Image`, `Audio`, `File`."""

    kind: ClassVar[MediaKind]
    noun: ClassVar[str]
    __slots__ = ("__weakref__", "_data", "_marks", "_sha256", "media_type", "name", "url")

    _data: bytes | None
    _sha256: str | None
    _marks: dict[str | None, int] | None
    url: str | None
    """The URL the value stands for (`from_url`), or None when it holds its bytes."""
    media_type: str | None
    """The IANA media type (`image/png`, `audio/wav`, `application/pdf`); None for a URL of unknown type."""
    name: str | None
    """A file name, when one is known (`from_path`, or given): a document's is sent where a provider wants one."""

    def __init__(self, *_: object, **__: object) -> None:
        raise TypeError(
            f"make an imp.{type(self).__name__} with imp.{type(self).__name__}.from_path(...), "
            ".from_bytes(...), .from_url(...) or .from_data_uri(...)"
        )

    @classmethod
    def _make(cls, *, data: bytes | None, url: str | None, media_type: str | None, name: str | None) -> Self:
        self = object.__new__(cls)
        set_ = object.__setattr__
        set_(self, "_data", data)
        set_(self, "url", url)
        set_(self, "media_type", media_type)
        set_(self, "name", name)
        set_(self, "_sha256", None)
        set_(self, "_marks", None)
        return self

    # --- making one ------------------------------------------------------------------------

    @classmethod
    def from_bytes(
        cls, data: bytes | bytearray | memoryview, media_type: str | None = None, *, name: str | None = None
    ) -> Self:
        """A value holding these bytes; the media type is read from their signature when not given."""
        given: object = data
        if not isinstance(given, bytes | bytearray | memoryview):
            hint = ": a path is from_path(...), a URL from_url(...)" if isinstance(given, str) else ""
            raise TypeError(f"imp.{cls.__name__}.from_bytes takes bytes, got {type(given).__name__}{hint}")
        raw = data if type(data) is bytes else bytes(data)
        if not raw:
            raise ValueError(f"imp.{cls.__name__}.from_bytes got no bytes")
        return cls._make(data=raw, url=None, media_type=cls._settle_type(raw, media_type, name), name=name)

    @classmethod
    def from_path(cls, path: str | Path, media_type: str | None = None) -> Self:
        """A value holding the file's bytes, read now; the type from the bytes, else the file name."""
        target = Path(path)
        try:
            raw = target.read_bytes()
        except IsADirectoryError:
            raise ValueError(f"imp.{cls.__name__}.from_path: {str(path)!r} is a folder, not a file") from None
        if not raw:
            raise ValueError(f"imp.{cls.__name__}.from_path: {str(path)!r} is empty")
        return cls._make(
            data=raw, url=None, media_type=cls._settle_type(raw, media_type, target.name), name=target.name
        )

    @classmethod
    def from_url(cls, url: str, media_type: str | None = None) -> Self:
        """A value standing for an http(s) URL, sent as the URL where the provider takes one; never fetched
        by imp unless `await value.fetch()` asks. A `data:` URI is read as by `from_data_uri`."""
        if not isinstance(url, str):
            raise TypeError(f"imp.{cls.__name__}.from_url takes a URL string, got {type(url).__name__}")
        if url[:5].lower() == "data:":
            return cls.from_data_uri(url)
        parts = urlsplit(url)
        if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
            raise ValueError(
                f"imp.{cls.__name__}.from_url takes an http(s) URL, got {_shown_url(url)!r}; "
                f"a local file is imp.{cls.__name__}.from_path(...)"
            )
        name = unquote(parts.path.rsplit("/", 1)[-1]) or None
        guessed = normal_media_type(media_type) if media_type else (type_from_name(name) if name else None)
        if guessed is not None:
            cls._check_type(guessed)
        return cls._make(data=None, url=url, media_type=guessed, name=name)

    @classmethod
    def from_data_uri(cls, uri: str) -> Self:
        """A value holding the bytes of a `data:<type>;base64,<data>` URI (or a URL-encoded one)."""
        if not isinstance(uri, str):
            raise TypeError(f"imp.{cls.__name__}.from_data_uri takes a string, got {type(uri).__name__}")
        match = _DATA_URI.match(uri)
        if match is None:
            raise ValueError(
                f"imp.{cls.__name__}.from_data_uri takes 'data:<media type>;base64,<data>', got {uri[:40]!r}"
            )
        payload = uri[match.end() :]
        params = [p.strip().lower() for p in match.group("params").split(";") if p.strip()]
        if "base64" in params:
            try:
                raw = base64.b64decode(payload, validate=True)
            except (binascii.Error, ValueError):
                raise ValueError(f"imp.{cls.__name__}.from_data_uri: the data is not valid base64") from None
        else:
            raw = unquote(payload).encode()
        declared = match.group("type").strip() or None
        return cls.from_bytes(raw, declared)

    @classmethod
    def _settle_type(cls, data: bytes, given: str | None, name: str | None) -> str:
        """The media type: as given (checked against the bytes' signature), else sniffed, else from the name."""
        sniffed = sniff(data)
        if given is not None:
            if not isinstance(given, str) or "/" not in given:
                raise ValueError(f"imp.{cls.__name__}: media_type is a type like 'image/png', got {given!r}")
            declared = normal_media_type(given)
            kind_of = declared.split("/")[0]
            if (
                sniffed is not None
                and sniffed != declared
                and (kind_of in ("image", "audio") or declared == "application/pdf")
            ):
                # Providers refuse a type that does not match the bytes (Anthropic: "Image does not
                # match the provided media type"): say so here, where the value is made.
                raise ValueError(f"imp.{cls.__name__}: media_type says {declared} but the bytes are {sniffed}")
            cls._check_type(declared)
            return declared
        found = sniffed or (type_from_name(name) if name else None) or cls._fallback_type(data)
        if found is None:
            raise ValueError(
                f"imp.{cls.__name__}: cannot tell what type of {cls.noun} these bytes are; pass media_type='...'"
            )
        cls._check_type(found)
        return found

    @classmethod
    def _fallback_type(cls, data: bytes) -> str | None:
        return None

    @classmethod
    def _check_type(cls, media_type: str) -> None:
        major = media_type.split("/", 1)[0]
        if major != cls.kind:
            other = {"image": "imp.Image", "audio": "imp.Audio"}.get(major, "imp.File")
            raise ValueError(f"imp.{cls.__name__} holds {cls.noun}s, but this is {media_type}: use {other}")

    # --- reading it ------------------------------------------------------------------------

    @property
    def data(self) -> bytes | None:
        """The bytes, or None for a URL not fetched."""
        return self._data

    @property
    def size(self) -> int | None:
        """The number of bytes held (None for a URL)."""
        return None if self._data is None else len(self._data)

    @property
    def sha256(self) -> str:
        """The SHA-256 of the bytes (of the URL, for a URL), hex; computed once."""
        digest = self._sha256
        if digest is None:
            material = self._data if self._data is not None else (self.url or "").encode()
            digest = hashlib.sha256(material).hexdigest()
            object.__setattr__(self, "_sha256", digest)
        return digest

    def base64(self) -> str:
        """The bytes as base64 text (made on each call: a request streams them instead)."""
        if self._data is None:
            raise ValueError(f"{self!r} is a URL; fetch it first: await value.fetch()")
        return base64.b64encode(self._data).decode("ascii")

    def data_uri(self) -> str:
        """The bytes as a `data:<type>;base64,...` URI."""
        return f"data:{self.media_type};base64,{self.base64()}"

    def describe(self) -> str:
        """The short description every readable place shows: kind, type, size, digest (or the URL)."""
        if self._data is None:
            return f"{self.kind} at {_shown_url(self.url or '')}"
        return f"{self.kind}: {self.media_type}, {describe_size(len(self._data))}, sha256:{self.sha256[:12]}"

    def __str__(self) -> str:
        return f"[{self.describe()}]"

    def __repr__(self) -> str:
        if self._data is None:
            return f"imp.{type(self).__name__}(url={_shown_url(self.url or '')!r})"
        return (
            f"imp.{type(self).__name__}({self.media_type}, {describe_size(len(self._data))}, sha256:{self.sha256[:12]})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Media):
            return NotImplemented
        return (
            self.kind == other.kind
            and self.media_type == other.media_type
            and self.url == other.url
            and self._data == other._data
        )

    def __hash__(self) -> int:
        return hash((self.kind, self.media_type, self.sha256))

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError(f"imp.{type(self).__name__} is immutable")

    def __delattr__(self, key: str) -> None:
        raise AttributeError(f"imp.{type(self).__name__} is immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.kind, self._data, self.url, self.media_type, self.name))

    def __copy__(self) -> Self:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        return self  # immutable: a copy would only double the bytes

    # --- fetching a URL, when asked ---------------------------------------------------------

    async def fetch(self, *, max_bytes: int = _FETCH_LIMIT, timeout: float = 30.0) -> Self:  # noqa: ASYNC109 - the HTTP client's own
        """The same media holding the URL's bytes, downloaded now (at most `max_bytes`); a value that
        holds its bytes already is returned as it is. imp calls this only when you do."""
        if self._data is not None:
            return self
        import httpx

        url = self.url or ""
        chunks: list[bytes] = []
        received = 0
        async with (
            httpx.AsyncClient(follow_redirects=True, timeout=timeout) as client,
            client.stream("GET", url) as response,
        ):
            if response.status_code >= 400:
                raise ValueError(f"fetching {_shown_url(url)} failed: HTTP {response.status_code}")
            declared = response.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > max_bytes:
                raise ValueError(f"{_shown_url(url)} is {describe_size(int(declared))}, over max_bytes={max_bytes}")
            async for chunk in response.aiter_bytes():
                received += len(chunk)
                if received > max_bytes:
                    raise ValueError(f"{_shown_url(url)} is over max_bytes={max_bytes}")
                chunks.append(chunk)
            served = response.headers.get("content-type")
        data = b"".join(chunks)
        served_type = normal_media_type(served) if served else None
        if served_type and self.kind != "file" and served_type.split("/")[0] != self.kind and sniff(data) is None:
            # a page in place of the image (a login wall, an error page): not what the URL promised
            raise ValueError(f"{_shown_url(url)} served {served_type}, not {self.noun}")
        usable = served_type if served_type and served_type.split("/")[0] == self.kind else None
        given = self.media_type or usable
        fetched = type(self).from_bytes(data, given if sniff(data) is None else None, name=self.name)
        return fetched

    # --- saving -----------------------------------------------------------------------------

    def dump(self) -> dict[str, Any]:
        """The saved form: the kind, type, base64 bytes and their SHA-256 (checked on load), or the URL."""
        out: dict[str, Any] = {MEDIA_KEY: self.kind}
        if self.media_type is not None:
            out["media_type"] = self.media_type
        if self.name is not None:
            out["name"] = self.name
        if self._data is None:
            out["url"] = self.url
        else:
            out["data"] = self.base64()
            out["sha256"] = self.sha256
        return out

    @staticmethod
    def load(saved: Mapping[str, Any]) -> Media:
        """A media value from its saved form, checked: only these keys, base64 that decodes, the same
        SHA-256, a type of its kind, an http(s) URL. Nothing is read from a path, nothing is fetched."""
        kind = saved.get(MEDIA_KEY)
        cls = _BY_KIND.get(kind) if isinstance(kind, str) else None
        if cls is None:
            raise ValueError(f"a saved media value names an unknown kind {kind!r}")
        unknown = set(saved) - {MEDIA_KEY, "media_type", "name", "data", "sha256", "url"}
        if unknown:
            raise ValueError(f"a saved {kind} has unknown keys {sorted(unknown)} (a saved file never names a path)")
        name = saved.get("name")
        if name is not None and not isinstance(name, str):
            raise ValueError(f"a saved {kind}'s name is a string")
        media_type = saved.get("media_type")
        if "url" in saved:
            if "data" in saved:
                raise ValueError(f"a saved {kind} has a URL or data, not both")
            return cls.from_url(str(saved["url"]), media_type if isinstance(media_type, str) else None)
        data = saved.get("data")
        if not isinstance(data, str) or not isinstance(media_type, str):
            raise ValueError(f"a saved {kind} needs its media_type and base64 data")
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"a saved {kind}'s data is not valid base64") from None
        value = cls.from_bytes(raw, media_type, name=name)
        if saved.get("sha256") != value.sha256:
            raise ValueError(f"a saved {kind}'s bytes do not match its sha256 (the file was changed)")
        return value

    # --- pydantic (field validation in signatures) ---------------------------------------------

    @classmethod
    def __get_pydantic_core_schema__(cls, source: object, handler: object) -> Any:
        from pydantic_core import core_schema

        return core_schema.no_info_plain_validator_function(
            cls._validate, serialization=core_schema.plain_serializer_function_ser_schema(str)
        )

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: object, handler: object) -> dict[str, Any]:
        return {"type": "string", "description": f"{cls.noun} (imp.{cls.__name__})"}

    @classmethod
    def _validate(cls, value: object) -> Media:
        if isinstance(value, cls):
            return value
        raise ValueError(
            f"expected an imp.{cls.__name__}: make one with imp.{cls.__name__}.from_path(...), "
            ".from_url(...), .from_bytes(...) or .from_data_uri(...)"
        )


class Image(Media):
    """An image: PNG, JPEG, GIF, WebP, ... (`image/*`)."""

    kind = "image"
    noun = "image"
    __slots__ = ()


class Audio(Media):
    """An audio clip: WAV, MP3, ... (`audio/*`)."""

    kind = "audio"
    noun = "audio clip"
    __slots__ = ()


class File(Media):
    """A document: a PDF, plain text, or another type a provider reads as a file."""

    kind = "file"
    noun = "document"
    __slots__ = ()

    @classmethod
    def _fallback_type(cls, data: bytes) -> str | None:
        if b"\x00" in data[:4096]:
            return None
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        return "text/plain"

    @classmethod
    def _check_type(cls, media_type: str) -> None:
        major = media_type.split("/", 1)[0]
        if major in ("image", "audio"):
            other = "imp.Image" if major == "image" else "imp.Audio"
            raise ValueError(f"imp.File holds documents, but this is {media_type}: use {other}")


_BY_KIND: dict[str, type[Media]] = {"image": Image, "audio": Audio, "file": File}
MEDIA_CLASSES: Mapping[str, type[Media]] = {"Image": Image, "Audio": Audio, "File": File}
"""The media types by the names the signature string form knows them by."""


def _rebuild(kind: str, data: bytes | None, url: str | None, media_type: str | None, name: str | None) -> Media:
    return _BY_KIND[kind]._make(data=data, url=url, media_type=media_type, name=name)


def is_media(annotation: object) -> bool:
    """Whether an annotation is one of the media classes."""
    return isinstance(annotation, type) and issubclass(annotation, Media)


def media_in(annotation: Any) -> type[Media] | None:
    """The first media class an annotation names, inside containers and unions too, or None."""
    if is_media(annotation):
        found: type[Media] = annotation
        return found
    for arg in typing.get_args(annotation):
        inner = media_in(arg)
        if inner is not None:
            return inner
    return None


# --- markers: a media value standing in prompt text until the adapter places it ---------------------
# Adapters write each field as text. A media value writes a marker where it stands; once a message
# is assembled, the marker is cut out and the value put in its place as a content part, so every
# dialect (Chat, JSON, XML, templates) places media where the field stands without knowing of it.
# A marker carries this process's random nonce and a number: text a user or a model wrote cannot
# name a value, and a marker whose value is gone is left as text.

_NONCE = secrets.token_hex(8)
MARKER = re.compile(r"\[\[imp-media:" + _NONCE + r":(\d+)\]\]")
"""A marker in prompt text."""
MARKER_PREFIX = "[[imp-media:"
_LIVE: weakref.WeakValueDictionary[int, Media] = weakref.WeakValueDictionary()
_NUMBERS = itertools.count(1)


def markers_alive() -> bool:
    """Whether any media value that a marker stands for is alive (else no text holds one to place)."""
    return bool(_LIVE)


def media_marker(media: Media, origin: str | None = None) -> str:
    """The marker that stands for a media value in prompt text (one per value and origin)."""
    marks: dict[str | None, int] | None = media._marks
    if marks is None:
        marks = {}
        object.__setattr__(media, "_marks", marks)
    number = marks.get(origin)
    if number is None:
        number = marks[origin] = next(_NUMBERS)
    _LIVE[number] = media
    return f"[[imp-media:{_NONCE}:{number}]]"


def resolve_marker(number: int) -> tuple[Media, str | None] | None:
    """The media value a marker's number stands for and where it came from, or None."""
    media = _LIVE.get(number)
    if media is None or media._marks is None:
        return None
    for origin, mark in media._marks.items():
        if mark == number:
            return media, origin
    return None
