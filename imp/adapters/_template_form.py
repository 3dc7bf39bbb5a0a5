"""The reply form of a template: the text around each output's value, written and read the same way."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from imp.adapters._split import FieldSplitter
from imp.adapters._template_text import TemplateError
from imp.signature import Field, Signature
from imp.values import base_annotation, render_value, type_name

__all__ = ["SLOT", "Form", "form_splitter", "placeholder", "split_slots"]

SLOT = "\ue000{}\ue001"
"""How a value's place is marked while the form is expanded (private-use characters, never in a template)."""
_SLOT = re.compile("\ue000(\\d+)\ue001")


def placeholder(field: Field) -> str:
    """What stands for an output's value where the form is shown: `...` for text, else `(type)`."""
    annotation = base_annotation(field.annotation)
    if annotation is str and not field.constraints:
        return "..."
    return f"({type_name(annotation)})"


def split_slots(expanded: str, outputs: Sequence[Field]) -> list[str | Field]:
    """An expanded form as literal text and the output fields between it."""
    parts = _SLOT.split(expanded)
    pieces: list[str | Field] = []
    for i, part in enumerate(parts):
        pieces.append(outputs[int(part)] if i % 2 else part)
    return pieces


def _anchor_pattern(text: str) -> re.Pattern[str] | None:
    """The literal text around values as a search pattern: stripped, any whitespace run matches any other."""
    words = text.split()
    if not words:
        return None
    return re.compile(r"\s+".join(re.escape(w) for w in words))


@dataclass(frozen=True, slots=True)
class Form:
    """Literal texts and values in order: `texts[i]` comes before `fields[i]`, `texts[-1]` after the last."""

    texts: tuple[str, ...]
    fields: tuple[Field, ...]
    patterns: tuple[re.Pattern[str] | None, ...] = field(init=False)
    needles: tuple[str | None, ...] = field(init=False)
    """The anchor as plain text when it is one word (found with `str.find`, the common case)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "patterns", tuple(_anchor_pattern(t) for t in self.texts))
        object.__setattr__(self, "needles", tuple(t.strip() if len(t.split()) == 1 else None for t in self.texts))

    @classmethod
    def build(cls, pieces: Sequence[str | Field], outputs: Mapping[str, Field], where: str) -> Form:
        """A form from its pieces, refused when a reply written in it could not be split back into values."""
        texts: list[str] = [""]
        fields: list[Field] = []
        for piece in pieces:
            if isinstance(piece, str):
                texts[-1] += piece
            else:
                fields.append(piece)
                texts.append("")
        seen = [f.name for f in fields]
        twice = sorted({n for n in seen if seen.count(n) > 1})
        if twice:
            raise TemplateError(f"{where}: the reply form holds {', '.join(f'`{n}`' for n in twice)} twice")
        absent = [n for n in outputs if n not in seen]
        if absent:
            raise TemplateError(
                f"{where}: the reply form has no place for {', '.join(f'`{n}`' for n in absent)}; "
                "spell every output in it (e.g. `{% for f in outputs %}{f.name}: {f.value}\\n{% endfor %}`)"
            )
        for i in range(1, len(fields)):
            if not texts[i].strip():
                raise TemplateError(
                    f"{where}: the reply form has no text between `{fields[i - 1].name}` and `{fields[i].name}`, "
                    "so a reply cannot be split into the two values; put a label or a line between them"
                )
        return cls(tuple(texts), tuple(fields))

    def write(self, values: Mapping[str, object], missing: str) -> str:
        """The form filled with values (a demo's or a history turn's outputs)."""
        out = [self.texts[0]]
        for item, text in zip(self.fields, self.texts[1:], strict=True):
            out.append(render_value(values[item.name], item) if item.name in values else missing)
            out.append(text)
        return "".join(out).strip()

    def check_value(self, name: str, value: object) -> None:
        """Refuse a value that holds the text read as the end of its place (it would be read back cut short)."""
        for i, item in enumerate(self.fields):
            pattern = self.patterns[i + 1]
            if item.name != name or pattern is None:
                continue
            after = self.texts[i + 1].split()
            if pattern.search(render_value(value, item)):
                raise TemplateError(
                    f"the demo value of `{name}` contains {' '.join(after)!r}, the form's text after it, "
                    "so it could not be read back; change the value or the template"
                )

    def read(self, text: str) -> dict[str, str]:
        """The value text of each output found: what lies between the literal text around it."""
        count, size = len(self.fields), len(text)
        starts = [-1] * (count + 1)
        ends = [-1] * (count + 1)
        pos = 0
        for i in range(count + 1):
            needle = self.needles[i]
            if needle is not None:
                at = text.find(needle, pos)
                if at >= 0:
                    starts[i], ends[i] = at, at + len(needle)
                    pos = ends[i]
                continue
            pattern = self.patterns[i]
            if pattern is None:
                if i == 0:
                    starts[0] = ends[0] = 0
                elif i == count:
                    starts[i] = ends[i] = size
                continue
            match = pattern.search(text, pos)
            if match is not None:
                starts[i], ends[i] = match.span()
                pos = ends[i]
        found: dict[str, str] = {}
        for i in range(count):
            begin = ends[i]
            if begin < 0:
                continue
            end = size
            for j in range(i + 1, count + 1):
                if starts[j] >= begin:
                    end = starts[j]
                    break
            value = text[begin:end].strip()
            if value:
                found[self.fields[i].name] = value
        return found


def form_splitter(form: Form | None, signature: Signature) -> FieldSplitter:
    """A streamed reply read by the form: each output opens at the text before it and ends at the next
    text (no form: the whole reply is the one output)."""
    if form is None:
        (only,) = signature.outputs
        return FieldSplitter(lambda buf, pos: (only, 0, 0) if pos == 0 else None, lambda b, p, f: None, lambda f: ())
    patterns = form.patterns
    names = [f.name for f in form.fields]
    anchors = tuple(" ".join(t.split()) for t in form.texts)
    opened = 0  # the outputs opened so far: the form's order is the reply's

    def anchor(i: int, buf: str, pos: int) -> tuple[int, int] | None:
        pattern = patterns[i]
        if pattern is None:
            return (0, 0) if i == 0 else None
        match = pattern.search(buf, pos)
        return match.span() if match is not None else None

    def find_open(buf: str, pos: int) -> tuple[str, int, int] | None:
        nonlocal opened
        for i in range(opened, len(names)):
            span = anchor(i, buf, pos)
            if span is not None:
                opened = i + 1
                return names[i], span[0], span[1]
        return None

    def find_close(buf: str, pos: int, field: str) -> tuple[int, int] | None:
        for i in range(names.index(field) + 1, len(names) + 1):
            span = anchor(i, buf, pos)
            if span is not None:
                return span[0], span[0]
        return None

    def markers(field: str) -> tuple[str, ...]:
        later = anchors[names.index(field) + 1 :] if field else anchors
        return tuple(a for a in later if a)

    return FieldSplitter(find_open, find_close, markers)
