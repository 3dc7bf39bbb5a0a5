"""The docstring reader: summary and parameter descriptions in the Google, NumPy and Sphinx styles."""

from __future__ import annotations

import pytest

from imp.tools._docstring import parse_docstring

# (docstring as written under a `def`, expected summary, expected parameter descriptions)
CASES: dict[str, tuple[str, str, dict[str, str]]] = {
    "google": (
        """Do foobar stuff, a lot.

        Args:
            foo: The foo thing.
            bar: The bar thing.
        """,
        "Do foobar stuff, a lot.",
        {"foo": "The foo thing.", "bar": "The bar thing."},
    ),
    "google with types, continuation and returns": (
        """Page an engineer.

        Arguments:
            name (str): Who to page,
                by first name.
            urgent (bool, optional): Whether to wake them.
            mapping (dict(str, int)): Counts (by team): per squad.
            *args: Extra positional.
            **kwargs: Extra keywords.

        Returns:
            name: not a parameter.
        """,
        "Page an engineer.",
        {
            "name": "Who to page, by first name.",
            "urgent": "Whether to wake them.",
            "mapping": "Counts (by team): per squad.",
            "args": "Extra positional.",
            "kwargs": "Extra keywords.",
        },
    ),
    "google, text on the next line": (
        """Summary.

        Args:
            foo:
                The foo thing,
                on two lines.
        """,
        "Summary.",
        {"foo": "The foo thing, on two lines."},
    ),
    "google, only the Args section": (
        """Args:
            foo: The foo thing.
            bar: The bar thing.
        """,
        "",
        {"foo": "The foo thing.", "bar": "The bar thing."},
    ),
    "google, Args section after a blank first line": (
        """
        Args:
            foo: The foo thing.
        """,
        "",
        {"foo": "The foo thing."},
    ),
    "google Parameters and Keyword Args sections": (
        """Summary.

        Parameters:
            foo: The foo.

        Keyword Args:
            bar: The bar.
        """,
        "Summary.",
        {"foo": "The foo.", "bar": "The bar."},
    ),
    "google section followed by prose": (
        """Summary.

        Args:
            foo: The foo.

        More prose: not a parameter.
        """,
        "Summary.",
        {"foo": "The foo."},
    ),
    "numpy": (
        """Numpy style docstring.

        Parameters
        ----------
        foo : int
            The foo thing.
        bar : str, optional
            The bar thing,
            continued.
        x, y : float
            Coordinates.
        flag
            No type given.

        Returns
        -------
        str
            Not a parameter.
        """,
        "Numpy style docstring.",
        {
            "foo": "The foo thing.",
            "bar": "The bar thing, continued.",
            "x": "Coordinates.",
            "y": "Coordinates.",
            "flag": "No type given.",
        },
    ),
    "numpy, only the Parameters section": (
        """Parameters
        ----------
        foo : int
            The foo thing.
        """,
        "",
        {"foo": "The foo thing."},
    ),
    "numpy Other Parameters": (
        """Summary.

        Parameters
        ----------
        a : int
            A.

        Other Parameters
        ----------------
        b : int
            B.
        """,
        "Summary.",
        {"a": "A.", "b": "B."},
    ),
    "sphinx": (
        """Sphinx style docstring.

        :param foo: The foo thing.
        :type foo: int
        :param str bar: The bar thing,
            continued.
        :arg baz: Baz.
        :keyword qux: Qux.
        :returns: Not a parameter.
        :rtype: str
        :raises ValueError: Not a parameter either.
        """,
        "Sphinx style docstring.",
        {"foo": "The foo thing.", "bar": "The bar thing, continued.", "baz": "Baz.", "qux": "Qux."},
    ),
    "sphinx right under the summary": (
        """Summary line.
        :param foo: The foo.
        """,
        "Summary line.",
        {"foo": "The foo."},
    ),
    "sphinx only": (
        """:param foo: The foo.""",
        "",
        {"foo": "The foo."},
    ),
    "summary is the first paragraph": (
        """Look up the on-call engineer
        for a squad.

        This paragraph is not part of the description.
        """,
        "Look up the on-call engineer for a squad.",
        {},
    ),
    "one line": ("Unknown style docstring.", "Unknown style docstring.", {}),
    "returns only": (
        """

        Returns:
            str: The result as a string.
        """,
        "",
        {},
    ),
    "an empty description is no description": (
        """Summary.

        Args:
            foo:
            bar: Bar.
        """,
        "Summary.",
        {"bar": "Bar."},
    ),
    "styles mixed, the first description wins": (
        """Summary.

        Args:
            foo: From Google.

        :param foo: From Sphinx.
        :param bar: Bar from Sphinx.
        """,
        "Summary.",
        {"foo": "From Google.", "bar": "Bar from Sphinx."},
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_style_gives_summary_and_parameters(case: str) -> None:
    doc, summary, parameters = CASES[case]
    parsed = parse_docstring(doc)
    assert parsed.summary == summary
    assert dict(parsed.parameters) == parameters


@pytest.mark.parametrize("doc", [None, "", "   \n  "])
def test_no_docstring_gives_nothing(doc: str | None) -> None:
    parsed = parse_docstring(doc)
    assert parsed.summary == "" and dict(parsed.parameters) == {}


def test_the_parameters_are_read_only() -> None:
    parsed = parse_docstring("S.\n\nArgs:\n    x: X.\n")
    with pytest.raises(TypeError):
        parsed.parameters["y"] = "Y."  # type: ignore[index]
