"""Programs: Predict, ChainOfThought, and (later) the ReAct loop."""

from imp.programs.base import Program, call, call_sync
from imp.programs.predict import ChainOfThought, Predict, chain_of_thought, predict

__all__ = ["ChainOfThought", "Predict", "Program", "call", "call_sync", "chain_of_thought", "predict"]
