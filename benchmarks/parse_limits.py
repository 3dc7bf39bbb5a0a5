"""What imp's parse limits cost on ordinary replies, and how long the worst hostile reply holds the loop.

Four tables:

1. Ordinary replies (tool arguments, a JSON-adapter reply, a large structured output, an XML reply),
   parsed with the limits on and with the checks replaced by no-ops: the ratio is the limits' cost.
2. Ordinary broken replies (trailing commas, Python spelling, a cut-off end) repaired by imp's
   reader, beside json-repair (the library imp used before) when it is installed.
3. The worst shapes found for each reader (deep nesting, unclosed strings and tags, comments), at
   growing sizes up to the size limit: the longest single parse is how long a hostile reply can
   hold the event loop.
4. The longest repair allowed: each repairable shape at exactly `max_repair_chars`.

    .venv/bin/python benchmarks/parse_limits.py          # all three
    .venv/bin/python benchmarks/parse_limits.py -n 2000  # fewer repetitions
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's imp, whatever the venv holds

import imp
import imp._json as reader
from imp.adapters import _xml_values

SIG = imp.signature("q -> answer: str, count: int, tags: list[str], data: dict[str, Any]")
ARGS = '{"city": "Oslo", "unit": "celsius", "days": 3}'
REPLY = json.dumps(
    {"answer": "The invoice was charged twice. " * 8, "count": 2, "tags": ["money", "billing"], "data": {"a": 1}}
)
LARGE = json.dumps(
    {"answer": "x", "count": 1, "tags": [f"tag {i}" for i in range(2000)], "data": {"rows": list(range(3000))}}
)
XML = (
    "<answer>The invoice was charged twice.</answer>\n<count>2</count>\n"
    "<tags><item>money</item><item>billing</item></tags>\n<data><a>1</a></data>"
)


def best(fn: Callable[[], Any], n: int) -> float:
    """The median of five runs of n calls, per call, in microseconds."""
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        runs.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(runs)


def limits_off() -> Callable[[], None]:
    """Replace the limit checks with no-ops; returns the function that puts them back."""
    saved = (reader.check_size_and_depth, reader.check_size, _xml_values._check_depth)
    reader.check_size_and_depth = lambda text, what="JSON": None  # type: ignore[assignment]
    reader.check_size = lambda text, what="JSON": None  # type: ignore[assignment]
    _xml_values._check_depth = lambda closes: None  # type: ignore[assignment]

    def restore() -> None:
        reader.check_size_and_depth, reader.check_size, _xml_values._check_depth = saved

    return restore


def ordinary(n: int) -> None:
    json_adapter, xml_adapter = imp.JSONAdapter(), imp.XMLAdapter()
    cases: dict[str, Callable[[], Any]] = {
        "tool arguments, 47 B (imp._json.loads)": lambda: reader.loads(ARGS),
        f"JSON-adapter reply, {len(REPLY)} B": lambda: json_adapter.parse(SIG, REPLY),
        f"structured output, {len(LARGE) // 1000} KB": lambda: json_adapter.parse(SIG, LARGE),
        f"XML-adapter reply, {len(XML)} B": lambda: xml_adapter.parse(SIG, XML),
    }
    print("\n1. Ordinary replies: microseconds per parse (median of 5 runs)\n")
    print("| reply | limits on | limits off | on / off |\n| --- | ---: | ---: | ---: |")
    for name, fn in cases.items():
        reps = n if "KB" not in name else max(10, n // 50)
        on = best(fn, reps)
        restore = limits_off()
        try:
            off = best(fn, reps)
        finally:
            restore()
        print(f"| {name} | {on:.1f} | {off:.1f} | {on / off:.2f} |")


BROKEN = {
    "trailing commas": "{'team': 'atlas', 'urgency': 2, 'tags': ['money'],}",
    "Python spelling": "{'a': True, 'b': None, 'c': 'it\\'s'}",
    "cut off": '{"city": "Paris", "days": [1, 2',
    "prose around, 4 KB": "Sure! " + json.dumps({"rows": [{"i": i, "v": "x" * 20} for i in range(100)]})[:-1] + ",} ok",
}


def repairs(n: int) -> None:
    try:
        import json_repair
    except ImportError:
        json_repair = None
    print("\n2. Ordinary repairs: microseconds per parse\n")
    print("| reply | imp | json-repair |\n| --- | ---: | ---: |")
    for name, text in BROKEN.items():
        mine = best(lambda t=text: reader.loads(t), max(10, n // 10))
        theirs = best(lambda t=text: json_repair.loads(t), max(10, n // 10)) if json_repair else float("nan")
        print(f"| {name} | {mine:.1f} | {theirs:.1f} |")


WORST: dict[str, Callable[[int], str]] = {
    "{ repeated (refused: depth)": lambda n: "{" * n,
    "60 x {, then text": lambda n: "{" * 60 + "a" * n,
    '[" repeated (refused: depth)': lambda n: '["' * (n // 2),
    "unclosed strings": lambda n: '{"a": "' * (n // 7),
    "objects without commas": lambda n: "[" + '{"a": 1 "b": [1 2]}' * (n // 20),
    "short tokens": lambda n: "[" + "1," * (n // 2),
    "comments": lambda n: "/*" * (n // 2),
}
XML_WORST: dict[str, Callable[[int], str]] = {
    "unclosed tags": lambda n: "<data>" * (n // 6),
    "distinct unclosed tags": lambda n: "<data>" + "".join(f"<t{i}>" for i in range(n // 7)) + "</data>",
    "items 90 deep": lambda n: "<data>" + "<item>" * 90 + "x" * n + "</item>" * 90 + "</data>",
    "many items": lambda n: "<data>" + "<item>x</item>" * (n // 14) + "</data>",
}


def once(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    with contextlib.suppress(ValueError, imp.ImpError):
        fn()
    return (time.perf_counter() - start) * 1000


def worst() -> None:
    sizes = (10_000, 100_000, 1_000_000, 4_000_000)
    json_adapter, xml_adapter = imp.JSONAdapter(), imp.XMLAdapter()
    sig = imp.signature("q -> data: list[Any]")
    print("\n3. Hostile replies: milliseconds for one parse (the event loop is held this long)\n")
    print("| reader | shape | " + " | ".join(f"{s // 1000:,} KB" for s in sizes) + " |")
    print("| --- | --- |" + " ---: |" * len(sizes))
    for name, make in WORST.items():
        texts = [make(s) for s in sizes]
        print(
            f"| imp._json.loads | {name} | "
            + " | ".join(f"{once(lambda t=t: reader.loads(t)):.1f}" for t in texts)
            + " |"
        )
    for name, make in WORST.items():
        texts = [make(s) for s in sizes]
        cells = " | ".join(f"{once(lambda t=t: json_adapter.parse(sig, t)):.1f}" for t in texts)
        print(f"| JSONAdapter | {name} | {cells} |")
    for name, make in XML_WORST.items():
        texts = [make(s) for s in sizes]
        cells = " | ".join(f"{once(lambda t=t: xml_adapter.parse(sig, t)):.1f}" for t in texts)
        print(f"| XMLAdapter | {name} | {cells} |")


def longest_repair() -> None:
    """The longest repair the limits allow: every repairable shape at `max_repair_chars`."""
    size = imp.settings().parse_limits.max_repair_chars
    shapes = {
        "short tokens": "[" + "1," * size,
        "unquoted keys": "{" + "a:b," * size,
        "objects without commas": "[" + '{"a": 1 "b": [1 2]}' * size,
        "comments": "[" + "1 /*c*/," * size,
        "strings": "[" + '"ab",' * size,
    }
    print(f"\n4. The longest repair allowed ({size:,} characters): milliseconds, best of 15\n")
    print("| shape | ms |\n| --- | ---: |")
    for name, text in shapes.items():
        text = text[:size]
        print(f"| {name} | {min(once(lambda t=text: reader.loads(t)) for _ in range(15)):.1f} |")
    start = time.perf_counter()
    sum(range(1_000_000))
    print(f"\n(this machine: sum(range(1e6)) took {(time.perf_counter() - start) * 1000:.1f} ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=20_000, help="calls per timed run of an ordinary reply")
    args = parser.parse_args()
    print(f"imp {imp.__version__}, Python {sys.version.split()[0]}")
    ordinary(args.n)
    repairs(args.n)
    worst()
    longest_repair()


if __name__ == "__main__":
    main()
