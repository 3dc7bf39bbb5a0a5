"""The media fixtures (tests/models/fixtures/providers/media/): recorded requests with their media bytes
kept once in `assets/`, and what the tests need to rebuild and compare them."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import imp

MEDIA = Path(__file__).parent / "fixtures" / "providers" / "media"
ASSETS = MEDIA / "assets"

KIWI = "cb587c5942a9.jpg"
POTATO = "83a9b40f64c1.jpg"
PDF = "3df79d34abbc.pdf"
MP3 = "320a252417d2.mp3"
PNG = "59edf55565bc.png"
WAV = "c726d333dd15.wav"


def asset(name: str) -> bytes:
    return (ASSETS / name).read_bytes()


def rebuilt(value: Any) -> Any:
    """A fixture value with each `{"$asset": ...}` reference back as the string that was recorded
    (checked against the recorded string's SHA-256)."""
    if isinstance(value, dict):
        if "$asset" in value:
            text = value["prefix"] + base64.b64encode(asset(value["$asset"])).decode()
            assert hashlib.sha256(text.encode()).hexdigest() == value["sha256"], value["$asset"]
            return text
        return {k: rebuilt(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rebuilt(v) for v in value]
    return value


def load_media_fixture(relative: str) -> dict[str, Any]:
    """A media fixture with its recorded strings rebuilt."""
    data = json.loads((MEDIA / relative).read_text())
    return {"source": data["source"], "interactions": rebuilt(data["interactions"])}


def image(name: str = KIWI) -> imp.Image:
    return imp.Image.from_bytes(asset(name))
