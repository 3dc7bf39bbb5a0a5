"""Programs with media in their demos save and load: the bytes inline with their SHA-256, URLs as URLs.

A program loaded in a fresh process sends the request the saved one sent, byte for byte; loading
never reads a path or fetches a URL, and a file whose media were changed is refused.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import imp
from imp.saving._file import _checksum

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))

from fake_provider import FakeProvider, Reply

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40
PDF = b"%PDF-1.4\n" + bytes(300)
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(64)
ANSWER = {
    "choices": [
        {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": "[[ ## answer ## ]]\nA cat.\n\n[[ ## completed ## ]]"},
        }
    ]
}


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    server = FakeProvider().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def url_server() -> Iterator[tuple[str, list[str]]]:
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(200)
            self.send_header("content-length", str(len(PNG)))
            self.end_headers()
            self.wfile.write(PNG)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", hits
    finally:
        server.shutdown()
        server.server_close()


def _program(url: str) -> imp.Predict:
    demos = [
        {"photo": imp.Image.from_bytes(PNG), "question": "What animal?", "answer": "A cat."},
        {"photo": imp.Image.from_url(f"{url}/dog.png"), "question": "And here?", "answer": "A dog."},
        {"photo": imp.Image.from_bytes(PNG + b"2"), "question": "No answer given?"},
    ]
    return imp.predict("photo: Image, question -> answer", demos=demos)


def test_a_saved_file_holds_the_bytes_inline_with_their_digest(tmp_path: Path) -> None:
    path = imp.save(_program("https://example.com"), tmp_path / "p.json")
    demos = json.loads(path.read_text())["program"]["demos"]
    assert demos[0]["photo"] == {
        "$media": "image",
        "media_type": "image/png",
        "data": base64.b64encode(PNG).decode(),
        "sha256": hashlib.sha256(PNG).hexdigest(),
    }
    assert demos[1]["photo"] == {
        "$media": "image",
        "media_type": "image/png",
        "name": "dog.png",
        "url": "https://example.com/dog.png",
    }
    loaded = imp.load(path)
    assert [d["photo"] for d in loaded.demos] == [d["photo"] for d in _program("https://example.com").demos]


LOAD_AND_SEND = """
import sys, imp
program = imp.load(sys.argv[1], lm=imp.lm("openai:gpt-4o", base_url=sys.argv[2], api_key="sk-test-abcdefghijklmnop1234"))
photo = imp.Image.from_path(sys.argv[3])
print(imp.call_sync(program, photo=photo, question="What now?").answer)
"""


def test_a_program_loaded_in_a_fresh_process_sends_the_same_bytes(
    tmp_path: Path, fake: FakeProvider, url_server: tuple[str, list[str]]
) -> None:
    base, hits = url_server
    program = _program(base)
    photo_path = tmp_path / "asked.png"
    photo_path.write_bytes(PNG + b"asked")
    path = imp.save(program, tmp_path / "p.json")
    fake.add(Reply(json=ANSWER), Reply(json=ANSWER))
    lm = imp.lm("openai:gpt-4o", base_url=fake.base_url, api_key="sk-test-abcdefghijklmnop1234")
    here = imp.call_sync(program.with_lm(lm), photo=imp.Image.from_path(photo_path), question="What now?")
    done = subprocess.run(
        [sys.executable, "-c", LOAD_AND_SEND, str(path), fake.base_url, str(photo_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == here.answer == "A cat."
    first, second = fake.requests
    assert second.raw == first.raw  # byte for byte, images included
    sent = json.loads(first.raw)["messages"]
    assert sent[1]["content"][1]["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert hits == []  # the URL demo was sent as its URL; neither process fetched it


def _tampered(path: Path, change: Any) -> Path:
    document = json.loads(path.read_text())
    change(document["program"]["demos"][0]["photo"])
    document["checksum"] = _checksum(document)  # an attacker can recompute the checksum: it is no signature
    target = path.with_name("tampered.json")
    target.write_text(json.dumps(document))
    return target


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda m: m.update(data=base64.b64encode(b"\x89PNG\r\n\x1a\nother").decode()), "do not match its sha256"),
        (lambda m: m.update(path="/etc/passwd"), "never names a path"),
        (lambda m: (m.pop("data"), m.pop("sha256"), m.update(url="file:///etc/passwd")), "takes an http"),
        (lambda m: m.update(data="%%%"), "not valid base64"),
        (lambda m: m.update({"$media": "executable"}), "unknown kind"),
    ],
)
def test_a_file_whose_media_were_changed_is_refused(tmp_path: Path, change: Any, says: str) -> None:
    path = imp.save(_program("https://example.com"), tmp_path / "p.json")
    with pytest.raises(imp.LoadError, match=f"demos\\[0\\].photo: .*{says}"):
        imp.load(_tampered(path, change))


def test_a_url_with_a_credential_is_saved_redacted(tmp_path: Path) -> None:
    program = imp.predict(
        "photo: Image -> answer",
        demos=[
            {
                "photo": imp.Image.from_url("https://cdn.example.com/a.png?api_key=sk-live-abcdefghijklmnop"),
                "answer": "x",
            }
        ],
    )
    text = imp.save(program, tmp_path / "p.json").read_text()
    assert "sk-live" not in text and "[REDACTED]" in text


def test_audio_and_documents_save_too(tmp_path: Path) -> None:
    demos = [
        {"clip": imp.Audio.from_bytes(WAV), "doc": imp.File.from_bytes(PDF, name="a.pdf"), "answer": "x"},
    ]
    program = imp.chain_of_thought("clip: Audio, doc: File -> answer", demos=demos)
    loaded = imp.load(imp.save(program, tmp_path / "p.json"))
    assert loaded.demos[0]["clip"] == demos[0]["clip"] and loaded.demos[0]["doc"].name == "a.pdf"


def test_a_react_program_with_media_demos_saves_too(tmp_path: Path) -> None:
    @imp.tool
    def look(what: str) -> str:
        """Look at something."""
        return what

    program = imp.react(
        "photo: Image -> answer", [look], demos=[{"photo": imp.Image.from_bytes(PNG), "answer": "A cat."}]
    )
    loaded = imp.load(imp.save(program, tmp_path / "p.json", registry={"look": look}), registry={"look": look})
    assert loaded.demos[0]["photo"] == imp.Image.from_bytes(PNG)
