"""What kind of media some bytes are: the magic numbers of the types the providers take.

The providers take a short, closed list of types (JPEG, PNG, GIF and WebP images; WAV and MP3
audio; PDF and plain-text documents), so this reads the signatures of those and a few neighbours
a user is likely to hold (BMP, TIFF, HEIC, AVIF, FLAC, Ogg, AAC, M4A), and nothing else: a type
no provider takes would be refused anyway, by name, before sending.
"""

from __future__ import annotations

import mimetypes

__all__ = ["normal_media_type", "sniff", "type_from_name"]

_ALIASES = {
    "image/jpg": "image/jpeg",
    "image/pjpeg": "image/jpeg",
    "image/x-png": "image/png",
    "audio/x-wav": "audio/wav",
    "audio/wave": "audio/wav",
    "audio/vnd.wave": "audio/wav",
    "audio/mp3": "audio/mpeg",
    "audio/x-mp3": "audio/mpeg",
    "audio/mpeg3": "audio/mpeg",
    "audio/x-flac": "audio/flac",
    "audio/x-m4a": "audio/mp4",
    "audio/m4a": "audio/mp4",
    "application/x-pdf": "application/pdf",
}

_ISO_BRANDS = {
    b"heic": "image/heic",
    b"heix": "image/heic",
    b"mif1": "image/heif",
    b"avif": "image/avif",
    b"M4A ": "audio/mp4",
}


def normal_media_type(media_type: str) -> str:
    """A media type lower-cased, without parameters, its common aliases read as the registered name."""
    base = media_type.split(";", 1)[0].strip().lower()
    return _ALIASES.get(base, base)


def _mp3_frame(head: bytes) -> bool:
    # An MPEG audio frame starts with 11 set bits; layer III is 01 in bits 1-2 of the second byte.
    return len(head) >= 2 and head[0] == 0xFF and (head[1] & 0xE0) == 0xE0 and (head[1] & 0x06) == 0x02


def sniff(data: bytes) -> str | None:
    """The media type the bytes' signature names, or None when none of the known ones matches."""
    head = data[:32]
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "image/webp"
    if head.startswith(b"RIFF") and head[8:12] == b"WAVE":
        return "audio/wav"
    if head.startswith(b"BM") and len(head) >= 14:
        return "image/bmp"
    if head.startswith((b"II*\x00", b"MM\x00*")):
        return "image/tiff"
    if head[4:8] == b"ftyp":
        return _ISO_BRANDS.get(head[8:12])
    if head.startswith(b"%PDF-"):
        return "application/pdf"
    if head.startswith(b"ID3") or _mp3_frame(head):
        return "audio/mpeg"
    if head.startswith(b"fLaC"):
        return "audio/flac"
    if head.startswith(b"OggS"):
        return "audio/ogg"
    if len(head) >= 2 and head[0] == 0xFF and (head[1] & 0xF6) == 0xF0:
        return "audio/aac"  # an ADTS frame
    return None


def type_from_name(name: str) -> str | None:
    """The media type a file name's extension suggests (Python's own table), or None."""
    guessed, _ = mimetypes.guess_type(name, strict=False)
    return normal_media_type(guessed) if guessed else None
