"""imp's frozen values (usage, responses, metadata, events) keep what a frozen, slotted dataclass promises."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

import imp
from imp.prediction import PredictionMetadata
from imp.runtime.run import Event


def test_imps_values_keep_their_defaults() -> None:
    usage = imp.Usage(input_tokens=3)
    assert usage + usage == imp.Usage(input_tokens=6)
    response = imp.LMResponse(text="hi")
    assert response.usage == imp.Usage() and response.finish_reason == "stop" and response.tool_calls == ()
    metadata = PredictionMetadata(lm_calls=1)
    assert metadata.extra == {} and metadata.extra is not PredictionMetadata().extra
    assert metadata["lm_calls"] == 1 and metadata.replace(lm_calls=2).lm_calls == 2


@pytest.mark.parametrize(
    "value",
    [
        imp.Usage(input_tokens=3, output_tokens=1, requests=1),
        imp.LMResponse(text="hi", finish_reason="length"),
        PredictionMetadata(lm_calls=2),
        Event(1, "call-1", None, "run_started", 0.0, {"program": "Predict"}),
    ],
    ids=lambda v: type(v).__name__,
)
def test_they_stay_frozen_slotted_comparable_and_picklable(value: object) -> None:
    first = dataclasses.fields(value)[0].name  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, first, None)
    assert not hasattr(value, "__dict__")
    assert pickle.loads(pickle.dumps(value)) == value
    assert dataclasses.replace(value) == value  # type: ignore[type-var]
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        type(value)(no_such_field=1)
