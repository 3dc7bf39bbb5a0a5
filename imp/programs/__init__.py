"""Programs: Predict, ChainOfThought, and (later) the ReAct loop."""

from imp.programs import _validate  # noqa: F401 - installs the checked call of a Predict with validate=
from imp.programs.base import Program, call, call_sync
from imp.programs.function import FunctionProgram, fn, out
from imp.programs.predict import ChainOfThought, Predict, chain_of_thought, predict
from imp.programs.react import CONTINUE, Finish, ReAct, react
from imp.programs.react_trajectory import ReActTrajectory, react_trajectory

__all__ = [
    "CONTINUE",
    "ChainOfThought",
    "Finish",
    "FunctionProgram",
    "Predict",
    "Program",
    "ReAct",
    "ReActTrajectory",
    "call",
    "call_sync",
    "chain_of_thought",
    "fn",
    "out",
    "predict",
    "react",
    "react_trajectory",
]
