"""imp._frozen.fast_init: the faster __init__ keeps everything a frozen, slotted dataclass promises."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from dataclasses import dataclass, field

import pytest

import imp
from imp._frozen import fast_init
from imp.prediction import PredictionMetadata


@fast_init
@dataclass(frozen=True, slots=True)
class Point:
    x: int
    y: int = 2
    tags: list[str] = field(default_factory=list)


def test_it_takes_arguments_as_the_dataclass_did() -> None:
    assert Point(1) == Point(x=1, y=2, tags=[])
    assert Point(1, 5, ["a"]).tags == ["a"]
    assert Point(1).tags is not Point(1).tags  # a factory runs per instance
    assert str(inspect.signature(Point)) == "(x: 'int', y: 'int' = 2, tags: 'list[str]' = <factory>) -> None"
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        Point(1, z=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'x'"):
        Point()  # type: ignore[call-arg]


def test_it_stays_frozen_comparable_picklable_and_replaceable() -> None:
    p = Point(1, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 3  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(p)) == p
    assert dataclasses.replace(p, y=9) == Point(1, 9)
    assert repr(p) == "Point(x=1, y=2, tags=[])"
    assert not hasattr(p, "__dict__")


def test_imps_values_use_it_and_keep_their_defaults() -> None:
    usage = imp.Usage(input_tokens=3)
    assert usage + usage == imp.Usage(input_tokens=6)
    response = imp.LMResponse(text="hi")
    assert response.usage == imp.Usage() and response.finish_reason == "stop" and response.tool_calls == ()
    metadata = PredictionMetadata(lm_calls=1)
    assert metadata.extra == {} and metadata.extra is not PredictionMetadata().extra
    assert metadata["lm_calls"] == 1 and metadata.replace(lm_calls=2).lm_calls == 2


def test_it_refuses_classes_it_cannot_speed_up() -> None:
    @dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclass(slots=True)
    class NotFrozen:
        a: int

    @dataclass(frozen=True, slots=True)
    class PostInit:
        a: int

        def __post_init__(self) -> None:
            pass

    @dataclass(frozen=True, slots=True, kw_only=True)
    class KeywordOnly:
        a: int

    @dataclass(frozen=True, slots=True)
    class WithInitVar:
        a: int
        b: dataclasses.InitVar[int] = 0

    for cls in (NoSlots, NotFrozen, PostInit, KeywordOnly, WithInitVar):
        with pytest.raises(TypeError, match="fast_init"):
            fast_init(cls)
    with pytest.raises(TypeError, match="fast_init"):
        fast_init(int)  # type: ignore[arg-type]
