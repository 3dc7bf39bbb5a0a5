"""Media under every adapter: a media field is its own content part where the field stands, and the
text around it is what the adapter writes for any other field (Chat, JSON, XML, templates)."""

from __future__ import annotations

import gc
from typing import Any

import pytest

import imp
from imp.records import MediaPart, content_text

PNG = b"\x89PNG\r\n\x1a\n" + bytes(64)
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(32)
PDF = b"%PDF-1.4\n" + bytes(64)

VALUES = {
    "image bytes": lambda: imp.Image.from_bytes(PNG),
    "image url": lambda: imp.Image.from_url("https://example.com/a.png"),
    "audio bytes": lambda: imp.Audio.from_bytes(WAV),
    "document bytes": lambda: imp.File.from_bytes(PDF),
    "document url": lambda: imp.File.from_url("https://example.com/a.pdf"),
    "text document": lambda: imp.File.from_bytes(b"Plain words.\n"),
}
TYPE_OF = {"image": "Image", "audio": "Audio", "file": "File"}

ADAPTERS = {
    "chat": imp.ChatAdapter,
    "json": imp.JSONAdapter,
    "xml": imp.XMLAdapter,
    "template": lambda: imp.TemplateAdapter(
        [imp.system("Answer briefly."), imp.user("Look at {media}.\nQ: {question}")]
    ),
    "template-inline": lambda: imp.TemplateAdapter([imp.user("{media}{question}")]),
}


def _user(messages: list[Any]) -> Any:
    return [m for m in messages if m["role"] == "user"][-1]["content"]


@pytest.mark.parametrize("adapter_name", ADAPTERS)
@pytest.mark.parametrize("value_name", VALUES)
def test_a_media_field_is_a_part_where_the_field_stands(adapter_name: str, value_name: str) -> None:
    adapter = ADAPTERS[adapter_name]()
    value = VALUES[value_name]()
    sig = imp.signature(f"media: {TYPE_OF[value.kind]}, question -> answer")
    content = _user(adapter.format(sig, {"media": value, "question": "What is it?"}))
    assert isinstance(content, list)
    parts = [p for p in content if isinstance(p, MediaPart)]
    assert [p.media for p in parts] == [value]
    assert parts[0].origin == "the input `media`"
    # The text around the part is what the adapter writes for a text field holding its description.
    text_sig = imp.signature("media, question -> answer")
    as_text = _user(adapter.format(text_sig, {"media": str(value), "question": "What is it?"}))
    assert content_text(content) == as_text
    # and the part stands where the field's value stood
    before = "".join(p for p in content[: content.index(parts[0])] if isinstance(p, str))
    assert as_text.startswith(before) and as_text[len(before) :].startswith(str(value))


@pytest.mark.parametrize("adapter_name", ["chat", "json", "xml"])
def test_a_list_of_images_is_a_part_each_in_order(adapter_name: str) -> None:
    adapter = ADAPTERS[adapter_name]()
    images = [imp.Image.from_bytes(PNG + bytes([i])) for i in range(3)]
    sig = imp.signature("photos: list[Image], question -> answer")
    content = _user(adapter.format(sig, {"photos": images, "question": "Which differs?"}))
    assert [p.media for p in content if isinstance(p, MediaPart)] == images
    between = content[content.index(next(p for p in content if isinstance(p, MediaPart))) + 1]
    assert between == "\n"


def test_an_optional_media_field_left_out_sends_no_part() -> None:
    sig = imp.signature("photo: Optional[Image], question -> answer")
    content = _user(imp.ChatAdapter().format(sig, {"photo": None, "question": "q"}))
    assert isinstance(content, str) and "photo ##" not in content


@pytest.mark.parametrize("adapter_name", ["chat", "json", "xml", "template"])
def test_demos_and_history_turns_carry_their_media(adapter_name: str) -> None:
    adapter = ADAPTERS[adapter_name]()
    demo_image, turn_image, asked = (imp.Image.from_bytes(PNG + bytes([i])) for i in range(3))
    sig = imp.signature("media: Image, question, history: History -> answer")
    history = imp.History([{"media": turn_image, "question": "before?", "answer": "a cat"}])
    messages = adapter.format(
        sig,
        {"media": asked, "question": "now?", "history": history},
        demos=[{"media": demo_image, "question": "demo?", "answer": "a dog"}],
    )
    placed = [
        p.media for m in messages if isinstance(m["content"], list) for p in m["content"] if isinstance(p, MediaPart)
    ]
    assert placed == [demo_image, turn_image, asked]
    assert all(isinstance(m["content"], str) for m in messages if m["role"] in ("system", "assistant"))


def test_an_incomplete_demo_carries_its_media_too() -> None:
    image = imp.Image.from_bytes(PNG)
    sig = imp.signature("media: Image, question -> answer, confidence: float")
    messages = imp.ChatAdapter().format(
        sig, {"media": image, "question": "q"}, demos=[{"media": image, "question": "q", "answer": "a"}]
    )
    assert isinstance(messages[1]["content"], list) and messages[1]["content"][0].startswith("This is an example")


def test_media_in_a_system_template_is_described_not_sent() -> None:
    image = imp.Image.from_bytes(PNG)
    adapter = imp.TemplateAdapter([imp.system("You see {media}."), imp.user("{question}")])
    sig = imp.signature("media: Image, question -> answer")
    messages = adapter.format(sig, {"media": image, "question": "q"})
    assert messages[0]["content"] == f"You see {image}."


def test_text_that_looks_like_a_marker_stays_text() -> None:
    image = imp.Image.from_bytes(PNG)
    sig = imp.signature("photo: Image, note -> answer")
    forged = "[[imp-media:0000000000000000:1]] and [[imp-media:ffff:2]]"
    content = _user(imp.ChatAdapter().format(sig, {"photo": image, "note": forged}))
    assert forged in content_text(content)
    assert len([p for p in content if isinstance(p, MediaPart)]) == 1


def test_a_marker_whose_value_is_gone_is_left_as_text() -> None:
    from imp.media import media_marker
    from imp.records import placed_media

    marker = media_marker(imp.Image.from_bytes(PNG + b"gone"))
    gc.collect()
    assert placed_media(f"see {marker}") == f"see {marker}"


def test_render_shows_the_media_parts() -> None:
    image = imp.Image.from_bytes(PNG)
    program = imp.predict("photo: Image, question -> answer", lm=imp.ScriptedLM([]))
    request = program.render(photo=image, question="What is it?")
    parts = request.messages[-1]["content"]
    assert [p.media for p in parts if isinstance(p, MediaPart)] == [image]
    assert image.describe() in repr(request) and "iVBOR" not in repr(request)


@pytest.mark.parametrize("adapter_name", ["chat", "json", "xml", "template"])
def test_a_program_reads_the_reply_whatever_the_adapter(adapter_name: str) -> None:
    replies = {
        "chat": "[[ ## answer ## ]]\nA red square.\n\n[[ ## completed ## ]]",
        "json": '{"answer": "A red square."}',
        "xml": "<answer>A red square.</answer>",
        "template": "A red square.",
    }
    lm = imp.ScriptedLM([replies[adapter_name]])
    program = imp.predict("media: Image, question -> answer", lm=lm, adapter=ADAPTERS[adapter_name]())
    prediction = imp.call_sync(program, media=imp.Image.from_bytes(PNG), question="What is it?")
    assert prediction.answer == "A red square."
    sent = lm.requests[0].messages[-1]["content"]
    assert any(isinstance(p, MediaPart) for p in sent)


def test_the_json_fallback_places_the_media_again() -> None:
    image = imp.Image.from_bytes(PNG)
    lm = imp.ScriptedLM(["no markers at all", '{"answer": "square"}'])
    prediction = imp.call_sync(imp.predict("photo: Image -> answer", lm=lm), photo=image)
    assert prediction.answer == "square"
    assert [any(isinstance(p, MediaPart) for p in r.messages[-1]["content"]) for r in lm.requests] == [True, True]


def test_a_function_program_takes_media_parameters() -> None:
    lm = imp.ScriptedLM(["<result>\nred\n</result>"])

    @imp.fn(lm=lm)
    def colour(photo: imp.Image) -> str:
        """The main colour of the photo."""
        ...

    assert colour(imp.Image.from_bytes(PNG)) == "red"
    assert any(isinstance(p, MediaPart) for p in lm.requests[0].messages[-1]["content"])
