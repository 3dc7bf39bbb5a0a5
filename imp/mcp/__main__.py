"""`python -m imp.mcp module:attribute`: serve a program (or a mapping of tool name to program) over MCP.

The attribute is a program, a mapping, or a function of no arguments returning one. stdio by
default (stdout carries the protocol, logs go to stderr); `--http` serves Streamable HTTP.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from typing import Literal

import anyio


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments, load the programs, serve until the client leaves (stdio) or a signal."""
    parser = argparse.ArgumentParser(prog="python -m imp.mcp", description=__doc__)
    parser.add_argument("programs", help="module:attribute, a program, a mapping of programs, or a function making one")
    parser.add_argument("--name", default=None, help="the server's name (and a single program's tool name)")
    parser.add_argument("--http", action="store_true", help="serve Streamable HTTP instead of stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--path", default="/mcp")
    parser.add_argument(
        "--allow-host",
        action="append",
        default=None,
        metavar="HOST:PORT",
        help="a Host header to accept besides loopback ones (repeatable; the SDK refuses others)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    module_name, _, attribute = args.programs.partition(":")
    if not attribute:
        parser.error("the programs are module:attribute, e.g. my_agent:triage")
    sys.path.insert(0, ".")
    found = getattr(importlib.import_module(module_name), attribute)

    from imp.programs.base import Program

    programs = found if isinstance(found, Program) or not callable(found) else found()
    name = args.name or attribute.replace("make_", "")

    from imp.mcp._serve import serve

    transport: Literal["stdio", "http"] = "http" if args.http else "stdio"
    anyio.run(
        lambda: serve(
            programs,
            name=name,
            transport=transport,
            host=args.host,
            port=args.port,
            path=args.path,
            allowed_hosts=args.allow_host,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
