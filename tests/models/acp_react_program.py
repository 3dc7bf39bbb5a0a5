"""The program the ACP-over-a-model-server tests serve (`python -m imp.acp acp_react_program:make`).

A `react` agent with an `add` tool on `imp.lm("openai:<IMP_ACP_MODEL>", base_url=<IMP_ACP_BASE_URL>)`,
as a user writes it: no capabilities declared. `IMP_ACP_CONFIG` (JSON) holds its request options.
"""

from __future__ import annotations

import json
import os
from typing import Any

import imp


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def make(context: Any) -> imp.ReAct:
    lm = imp.lm(f"openai:{os.environ['IMP_ACP_MODEL']}", base_url=os.environ["IMP_ACP_BASE_URL"], timeout=120.0)
    config = json.loads(os.environ.get("IMP_ACP_CONFIG") or "{}")
    return imp.react("question -> answer", [add], lm=lm, config=config, max_iters=2)
