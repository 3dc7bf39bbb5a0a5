"""`python -m imp.acp module:factory`: serve the factory's programs over ACP on stdin and stdout."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments, load the factory, serve until stdin closes."""
    parser = argparse.ArgumentParser(prog="python -m imp.acp", description=__doc__)
    parser.add_argument("factory", help="module:function, called with each session's SessionContext")
    parser.add_argument("--input-key", default=None, help="the input the prompt's text goes to")
    parser.add_argument("--output-key", default=None, help="the output streamed as the agent's message")
    parser.add_argument("--permission-policy", default="client", choices=["client", "allow"])
    args = parser.parse_args(argv)
    # stdout carries the protocol and nothing else: logs go to stderr
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    module_name, _, attribute = args.factory.partition(":")
    if not attribute:
        parser.error("the factory is module:function, e.g. my_agent:make_program")
    sys.path.insert(0, ".")
    factory = getattr(importlib.import_module(module_name), attribute)

    from imp.acp._agent import serve

    asyncio.run(
        serve(
            factory,
            input_key=args.input_key,
            output_key=args.output_key,
            permission_policy=args.permission_policy,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
