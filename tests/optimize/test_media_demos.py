"""Optimizers on programs with media inputs: bootstrapped demos keep their images, save and load, and
go back to the model as images; GEPA's reflection reads them by their descriptions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers import RULE, reflection

import imp
from imp.optimize import GEPA, BootstrapFewShot, LabeledFewShot
from imp.records import MediaPart

COLOURS = {"red": (220, 30, 30), "green": (30, 200, 40), "blue": (30, 40, 220), "gold": (230, 190, 20)}


def _photo(name: str) -> imp.Image:
    # A PNG signature and a payload that says which colour it is (the teacher reads it back).
    return imp.Image.from_bytes(b"\x89PNG\r\n\x1a\n" + name.encode() + bytes(COLOURS[name]) * 50)


def _colour_of(messages: list[Any]) -> str:
    parts = [p for p in messages[-1]["content"] if isinstance(p, MediaPart)]
    data = parts[-1].media.data or b""
    return next(n for n in COLOURS if data[8:].startswith(n.encode()))


def teacher(messages: list[Any], options: dict[str, Any]) -> dict[str, Any]:
    colour = _colour_of(messages)
    shouts = any("UPPERCASE" in str(m.get("content")) for m in messages if m["role"] == "system")
    return {"colour": colour.upper() if shouts else colour}


def metric(example: imp.Example, prediction: imp.Prediction) -> imp.Score:
    right = prediction.colour.lower() == example.colour
    return imp.Score(1.0 if right else 0.0, feedback=None if right else "Name the colour.")


def trainset() -> list[imp.Example]:
    return [imp.Example(photo=_photo(n), colour=n).with_inputs("photo") for n in COLOURS]


async def test_bootstrapped_demos_keep_their_images_and_send_them(tmp_path: Path) -> None:
    lm = imp.StaticLM(teacher)
    program = imp.predict("photo: Image -> colour", lm=lm)
    made = await BootstrapFewShot(metric, max_bootstrapped_demos=2, max_labeled_demos=0).compile(
        program, trainset=trainset()
    )
    demos = made.demos
    assert len(demos) == 2 and all(isinstance(d["photo"], imp.Image) for d in demos)
    assert {d["photo"] for d in demos} <= {_photo(n) for n in COLOURS}
    loaded = imp.load(imp.save(made, tmp_path / "made.json", include_lm=False), lm=lm)
    assert [d["photo"] for d in loaded.demos] == [d["photo"] for d in demos]
    request = loaded.render(photo=_photo("gold"))
    placed = [
        p.media
        for m in request.messages
        if isinstance(m["content"], list)
        for p in m["content"]
        if isinstance(p, MediaPart)
    ]
    assert placed == [*(d["photo"] for d in demos), _photo("gold")]
    assert (await imp.call(loaded, photo=_photo("gold"))).colour == "gold"


async def test_labeled_demos_keep_their_images() -> None:
    made = await LabeledFewShot(k=3, seed=1).compile(imp.predict("photo: Image -> colour"), trainset=trainset())
    assert len(made.demos) == 3 and all(isinstance(d["photo"], imp.Image) for d in made.demos)


async def test_gepa_reflects_on_runs_with_images_by_their_descriptions() -> None:
    seen: list[str] = []
    propose = reflection()

    async def reflect(messages: list[Any], options: dict[str, Any]) -> Any:
        seen.append("\n".join(str(m["content"]) for m in messages))
        return await propose.request(messages, **options)

    def shouting_metric(example: imp.Example, prediction: imp.Prediction) -> imp.Score:
        right = prediction.colour == example.colour.upper()
        return imp.Score(1.0 if right else 0.0, feedback=None if right else "The answer must be uppercase.")

    data = [imp.Example(photo=_photo(n), colour=n).with_inputs("photo") for n in [*COLOURS, *COLOURS]]
    optimizer = GEPA(shouting_metric, reflection_lm=imp.StaticLM(reflect), max_metric_calls=40, progress=False)
    made = await optimizer.compile(
        imp.predict("photo: Image -> colour", lm=imp.StaticLM(teacher)), trainset=data[:4], valset=data[4:]
    )
    assert made.signature.instructions.startswith(RULE)
    assert seen and str(_photo("red")) in "".join(seen)
    assert "iVBOR" not in "".join(seen)
