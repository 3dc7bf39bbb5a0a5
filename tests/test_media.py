"""`imp.Image`, `imp.Audio`, `imp.File`: how they are made, what they hold, how they show, save and load."""

from __future__ import annotations

import base64
import copy
import http.server
import io
import json
import pickle
import threading
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import imp
from imp.media import Media, shorten_base64

PNG = b"\x89PNG\r\n\x1a\n" + bytes(100)
JPEG = b"\xff\xd8\xff\xe0" + bytes(100)
GIF = b"GIF89a" + bytes(100)
WEBP = b"RIFF\x00\x00\x00\x00WEBPVP8 " + bytes(100)
PDF = b"%PDF-1.7\n" + bytes(100)
MP3 = b"ID3\x04" + bytes(100)


def _wav() -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(bytes(200))
    return out.getvalue()


SNIFFED = [
    (imp.Image, PNG, "image/png"),
    (imp.Image, JPEG, "image/jpeg"),
    (imp.Image, GIF, "image/gif"),
    (imp.Image, WEBP, "image/webp"),
    (imp.Image, b"BM" + bytes(60), "image/bmp"),
    (imp.Image, b"\x00\x00\x00\x18ftypheic" + bytes(20), "image/heic"),
    (imp.Audio, _wav(), "audio/wav"),
    (imp.Audio, MP3, "audio/mpeg"),
    (imp.Audio, b"\xff\xfb\x90\x00" + bytes(100), "audio/mpeg"),
    (imp.Audio, b"fLaC" + bytes(50), "audio/flac"),
    (imp.Audio, b"OggS" + bytes(50), "audio/ogg"),
    (imp.File, PDF, "application/pdf"),
    (imp.File, "Zürich, 12 °C.\n".encode(), "text/plain"),
]


@pytest.mark.parametrize(("cls", "data", "media_type"), SNIFFED)
def test_from_bytes_reads_the_type_from_the_bytes(cls: type[Media], data: bytes, media_type: str) -> None:
    value = cls.from_bytes(data)
    assert (value.media_type, value.data, value.size, value.url) == (media_type, data, len(data), None)


def test_a_given_type_is_normalised_and_checked_against_the_bytes() -> None:
    assert imp.Image.from_bytes(JPEG, "image/JPG; q=1").media_type == "image/jpeg"
    assert imp.Audio.from_bytes(_wav(), "audio/x-wav").media_type == "audio/wav"
    with pytest.raises(ValueError, match="media_type says image/png but the bytes are image/jpeg"):
        imp.Image.from_bytes(JPEG, "image/png")
    with pytest.raises(ValueError, match="a type like 'image/png'"):
        imp.Image.from_bytes(PNG, "png")
    with pytest.raises(ValueError, match="cannot tell what type of image"):
        imp.Image.from_bytes(b"\x01\x02\x03 nothing known")
    assert imp.Image.from_bytes(b"\x01\x02\x03", "image/x-raw").media_type == "image/x-raw"


@pytest.mark.parametrize(
    ("cls", "data", "other"),
    [
        (imp.Image, MP3, "imp.Audio"),
        (imp.Audio, PNG, "imp.Image"),
        (imp.File, PNG, "imp.Image"),
        (imp.Image, PDF, "imp.File"),
    ],
)
def test_each_kind_holds_its_own_media(cls: type[Media], data: bytes, other: str) -> None:
    with pytest.raises(ValueError, match=f"use {other}"):
        cls.from_bytes(data)


def test_bad_bytes_arguments_say_what_to_use() -> None:
    with pytest.raises(TypeError, match="a path is from_path"):
        imp.Image.from_bytes("cat.png")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="got no bytes"):
        imp.Image.from_bytes(b"")
    with pytest.raises(TypeError, match=r"make an imp\.Image with imp\.Image\.from_path"):
        imp.Image(b"...")
    assert imp.Image.from_bytes(bytearray(PNG)).data == PNG


def test_from_path_reads_the_file_once_and_keeps_its_name(tmp_path: Path) -> None:
    path = tmp_path / "scan.pdf"
    path.write_bytes(PDF)
    value = imp.File.from_path(path)
    path.write_bytes(b"changed")
    assert (value.data, value.name, value.media_type) == (PDF, "scan.pdf", "application/pdf")
    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\n")
    assert imp.File.from_path(str(notes)).media_type == "text/markdown"
    with pytest.raises(FileNotFoundError):
        imp.Image.from_path(tmp_path / "missing.png")
    with pytest.raises(ValueError, match="is a folder"):
        imp.Image.from_path(tmp_path)


def test_from_url_keeps_the_url_and_guesses_the_type_from_its_name() -> None:
    value = imp.Image.from_url("https://example.com/img/cat%20photo.png?size=2")
    assert (value.url, value.data, value.media_type, value.name) == (
        "https://example.com/img/cat%20photo.png?size=2",
        None,
        "image/png",
        "cat photo.png",
    )
    assert imp.Image.from_url("https://example.com/render").media_type is None
    with pytest.raises(ValueError, match="takes an http\\(s\\) URL"):
        imp.Image.from_url("file:///etc/passwd")
    with pytest.raises(ValueError, match=r"a local file is imp\.File\.from_path"):
        imp.File.from_url("/etc/passwd")
    with pytest.raises(ValueError, match=r"use imp\.Audio"):
        imp.Image.from_url("https://example.com/a.mp3")


def test_data_uris_both_ways() -> None:
    value = imp.Image.from_data_uri("data:image/png;base64," + base64.b64encode(PNG).decode())
    assert value.data == PNG and value.media_type == "image/png"
    assert imp.Image.from_url(value.data_uri()) == value
    assert imp.File.from_data_uri("data:text/plain,caf%C3%A9").data == "café".encode()
    with pytest.raises(ValueError, match="not valid base64"):
        imp.Image.from_data_uri("data:image/png;base64,@@@")
    with pytest.raises(ValueError, match="takes 'data:"):
        imp.Image.from_data_uri("image/png;base64,AAAA")


def test_a_value_is_immutable_compares_by_content_and_pickles() -> None:
    value = imp.Image.from_bytes(PNG)
    with pytest.raises(AttributeError, match="immutable"):
        value.media_type = "image/gif"  # type: ignore[misc]
    same = imp.Image.from_bytes(bytes(PNG))
    assert value == same and hash(value) == hash(same) and value != imp.Image.from_bytes(PNG + b"x")
    assert value != imp.File.from_bytes(b"x") and imp.Image.from_url("https://a.b/c.png") == imp.Image.from_url(
        "https://a.b/c.png"
    )
    assert pickle.loads(pickle.dumps(value)) == value
    assert copy.deepcopy(value) is value


def test_it_shows_as_a_short_description_never_its_bytes() -> None:
    big = imp.Image.from_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4000)
    for shown in (repr(big), str(big), big.describe(), f"{[big]}", str({"photo": big})):
        assert len(shown) < 120 and big.base64()[:40] not in shown
    assert repr(big) == f"imp.Image(image/png, 1000.0 KB, sha256:{big.sha256[:12]})"
    assert str(big) == f"[image: image/png, 1000.0 KB, sha256:{big.sha256[:12]}]"
    signed = imp.Image.from_url("https://user:pw@cdn.example.com/a.png?X-Amz-Signature=abc&token=sk-live-123")
    assert repr(signed) == "imp.Image(url='https://cdn.example.com/a.png?...')"
    assert "pw" not in str(signed) and "abc" not in str(signed)


def test_a_dump_loads_back_checked() -> None:
    value = imp.File.from_bytes(PDF, name="scan.pdf")
    dumped = value.dump()
    assert dumped == {
        "$media": "file",
        "media_type": "application/pdf",
        "name": "scan.pdf",
        "data": base64.b64encode(PDF).decode(),
        "sha256": value.sha256,
    }
    assert Media.load(dumped) == value and Media.load(dumped).name == "scan.pdf"
    url = imp.Image.from_url("https://example.com/a.png")
    assert Media.load(url.dump()) == url


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"$media": "video"}, "unknown kind"),
        ({"path": "/etc/passwd"}, "never names a path"),
        ({"sha256": "0" * 64}, "do not match its sha256"),
        ({"data": "not base64!"}, "not valid base64"),
        ({"data": base64.b64encode(MP3).decode()}, "says image/png but the bytes are audio/mpeg"),
        ({"url": "file:///etc/passwd"}, "URL or data, not both"),
    ],
)
def test_a_hostile_dump_is_refused(changes: dict[str, Any], message: str) -> None:
    dumped = {**imp.Image.from_bytes(PNG).dump(), **changes}
    with pytest.raises(ValueError, match=message):
        Media.load(dumped)
    with pytest.raises(ValueError, match="takes an http"):
        Media.load({"$media": "image", "url": "file:///etc/passwd"})


@given(st.binary(min_size=1, max_size=2000), st.sampled_from(["image/png", "image/x-test", "image/webp"]))
def test_any_bytes_round_trip_through_a_dump(data: bytes, media_type: str) -> None:
    try:
        value = imp.Image.from_bytes(data, media_type)
    except ValueError:
        return  # the bytes' signature names another image type: refused, as tested above
    loaded = Media.load(value.dump())
    assert loaded == value and loaded.data == data and loaded.sha256 == value.sha256


@given(st.binary(min_size=1, max_size=3000))
def test_any_bytes_round_trip_through_a_data_uri(data: bytes) -> None:
    value = imp.File.from_bytes(data, "application/octet-stream")
    assert imp.File.from_data_uri(value.data_uri()) == value


def test_walls_of_base64_are_shortened_in_text() -> None:
    wall = base64.b64encode(bytes(range(256)) * 10).decode()
    text = f"Invalid image data: data:image/png;base64,{wall} at messages[1]"
    assert shorten_base64(text) == f"Invalid image data: [base64: {len(wall) + 22} chars] at messages[1]"
    assert shorten_base64({"error": {"message": wall, "n": 1}}) == {
        "error": {"message": f"[base64: {len(wall)} chars]", "n": 1}
    }
    assert shorten_base64("sha256:" + "ab" * 32) == "sha256:" + "ab" * 32


# --- fetching a URL, only when asked -----------------------------------------------------------------


@pytest.fixture
def image_server() -> Iterator[tuple[str, list[str]]]:
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            hits.append(self.path)
            if self.path == "/big.png":
                body = PNG + bytes(10_000)
            elif self.path == "/moved":
                self.send_response(302)
                self.send_header("location", "/cat.png")
                self.end_headers()
                return
            elif self.path == "/cat.png":
                body = PNG
            else:
                self.send_response(404)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("content-type", "image/png")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", hits
    finally:
        server.shutdown()
        server.server_close()


async def test_fetch_downloads_only_when_asked(image_server: tuple[str, list[str]]) -> None:
    base, hits = image_server
    value = imp.Image.from_url(f"{base}/moved")
    assert hits == [] and value.data is None
    fetched = await value.fetch()
    assert (fetched.data, fetched.media_type, fetched.url) == (PNG, "image/png", None)
    assert hits == ["/moved", "/cat.png"]
    assert await fetched.fetch() is fetched
    with pytest.raises(ValueError, match="over max_bytes=1000"):
        await imp.Image.from_url(f"{base}/big.png").fetch(max_bytes=1000)
    with pytest.raises(ValueError, match="HTTP 404"):
        await imp.Image.from_url(f"{base}/missing.png").fetch()


async def test_fetch_refuses_a_page_served_in_place_of_an_image() -> None:
    class Page(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            body = b"<html>please log in</html>"
            self.send_response(200)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(ValueError, match="served text/html, not image"):
            await imp.Image.from_url(f"http://127.0.0.1:{server.server_address[1]}/cat.png").fetch()
    finally:
        server.shutdown()
        server.server_close()


def test_a_history_with_media_round_trips_through_json_with_their_saved_form() -> None:
    photo = imp.Image.from_bytes(PNG)
    history = imp.History(
        [
            {"photo": photo, "question": "What?", "answer": "A square."},
            {"tool_calls": [{"id": "c1", "name": "chart", "arguments": {}}],
             "tool_call_results": [{"id": "c1", "name": "chart", "result": [photo, photo]}]},
        ]
    )  # fmt: skip
    dumped = history.dump()
    assert dumped["messages"][0]["photo"] is photo  # the value itself: nothing readable holds base64
    text = json.dumps(dumped, default=lambda value: value.dump())
    loaded = imp.History.load(json.loads(text))
    assert loaded[0]["photo"] == photo and loaded[1].results[0].result == [photo, photo]
