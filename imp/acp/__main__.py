"""`python -m imp.acp module:factory`: serve the factory's programs over ACP on stdin and stdout."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
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
    parser.add_argument(
        "--mcp-trusted",
        default=None,
        metavar="FILE",
        help="a JSON list of MCP server descriptors to connect when a session lists them (imp.mcp's trusted=)",
    )
    parser.add_argument(
        "--sessions",
        default=None,
        metavar="FILE",
        help="a SQLite file that keeps each session's history across restarts (session/load)",
    )
    args = parser.parse_args(argv)
    # stdout carries the protocol and nothing else: logs go to stderr
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    module_name, _, attribute = args.factory.partition(":")
    if not attribute:
        parser.error("the factory is module:function, e.g. my_agent:make_program")
    sys.path.insert(0, ".")
    factory = getattr(importlib.import_module(module_name), attribute)

    from imp.acp._agent import serve

    mcp = None
    if args.mcp_trusted is not None:
        with open(args.mcp_trusted, encoding="utf-8") as file:
            mcp = {"trusted": json.load(file)}

    store = None
    if args.sessions is not None:
        from imp.durable import SQLiteSessions

        store = SQLiteSessions(args.sessions)

    asyncio.run(
        serve(
            factory,
            store=store,
            input_key=args.input_key,
            output_key=args.output_key,
            permission_policy=args.permission_policy,
            mcp=mcp,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
