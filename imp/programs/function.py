"""Function programs: `@imp.fn` on a typed function; the docstring instructs, parameters are inputs.

The body is read, never run: it may hold the docstring, output declarations
(`verdict: str = imp.out("One short sentence.")`), `...`/`pass`, and a `return` of declared
outputs. Without such a return the return annotation is one more output, `result`, after the
declared ones. The source is needed because Python keeps no annotations of local variables.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from imp.adapters import ADAPTER_NAMES, Adapter
from imp.adapters.template import TemplateAdapter, system, turns, user
from imp.errors import ImpError, SignatureError
from imp.exchanges import program_label
from imp.prediction import Prediction
from imp.programs._parameters import Changes, Parameters
from imp.programs.base import Program, call_sync
from imp.programs.predict import Predict
from imp.signature import MISSING, Field, Signature

if TYPE_CHECKING:
    from imp.models.base import LM

__all__ = ["TAGGED", "FunctionError", "FunctionProgram", "Out", "fn", "out"]

RESULT = "result"
TAGGED = TemplateAdapter(
    [
        system(
            "{instruction}\n\nReply in exactly this form:\n"
            "{% for f in outputs %}<{f.name}>\n{f.value}\n</{f.name}>\n{% endfor %}"
        ),
        turns(),
        user("{% for f in inputs %}{% if f.value %}<{f.name}>\n{f.value}\n</{f.name}>\n{% endif %}{% endfor %}"),
    ]
)
"""The default layout of function programs: the instruction and the form in the system message, inputs in tags."""

AdapterName = Literal["chat", "json", "xml"]
_OPTIONS = frozenset(
    {
        "lm",
        "adapter",
        "template",
        "tools",
        "demos",
        "config",
        "adapter_opts",
        "json_fallback",
        "max_iters",
        "instructions",
        "extract_instructions",
        "validate",
        "max_retries",
    }
)


@dataclass(frozen=True, slots=True)
class Out:
    """An output declared in a function program's body: its description and default."""

    desc: str = ""
    default: Any = MISSING


def out(desc: str = "", *, default: object = MISSING) -> Any:
    """Declare an output in a function program's body: `verdict: str = imp.out("One short sentence.")`."""
    if not isinstance(desc, str):
        raise TypeError(f"imp.out takes the output's description, a string; got {type(desc).__name__}")
    return Out(desc, default)


class FunctionError(ImpError, TypeError):
    """A function that cannot be a function program (unannotated, a body that does more than declare outputs)."""


@dataclass(frozen=True, slots=True)
class _Shape:
    """What a function declares: its signature and which outputs a call returns (None: `result`)."""

    signature: Signature
    returns: tuple[str, ...] | None


def _where(fn: Callable[..., object]) -> str:
    return f"@imp.fn {getattr(fn, '__qualname__', fn)!r}"


def _function_node(fn: Callable[..., object]) -> ast.FunctionDef | ast.AsyncFunctionDef:
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        raise FunctionError(
            f"{_where(fn)}: its source cannot be read (defined in a string or a bare REPL?); "
            "imp reads the body to find the declared outputs, so define it in a file or a notebook cell"
        ) from None
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == fn.__name__:
            return node
    raise FunctionError(f"{_where(fn)}: its definition was not found in its source")


def _namespace(fn: Callable[..., object]) -> dict[str, Any]:
    names = dict(fn.__globals__)
    closure = inspect.getclosurevars(fn)
    names.update(closure.nonlocals)
    return names


def _evaluate(expr: ast.expr, names: Mapping[str, object], fn: Callable[..., object]) -> object:
    code = compile(ast.Expression(expr), f"<{fn.__name__} declaration>", "eval")
    try:
        return eval(code, dict(names))  # the user's own declaration, evaluated as Python would
    except Exception as exc:
        raise FunctionError(f"{_where(fn)}: line {expr.lineno}: {ast.unparse(expr)} failed: {exc}") from None


def _is_out_call(value: ast.expr | None) -> bool:
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    return (isinstance(func, ast.Name) and func.id == "out") or (isinstance(func, ast.Attribute) and func.attr == "out")


def _shape(fn: Callable[..., object], instructions: str | None = None) -> _Shape:
    """Read a function's parameters, return annotation and body into a signature."""
    where = _where(fn)
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise FunctionError(f"{where}: its annotations cannot be resolved ({exc})") from None
    inputs: list[Field] = []
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise FunctionError(f"{where}: *{param.name} cannot be an input; name each input as a parameter")
        if param.name not in hints:
            raise FunctionError(
                f"{where}: the parameter `{param.name}` has no type annotation; write `{param.name}: str`"
            )
        default = MISSING if param.default is inspect.Parameter.empty else param.default
        inputs.append(Field(param.name, "input", hints[param.name], default=default))
    if "return" not in hints:
        raise FunctionError(f"{where}: it has no return annotation; write `-> str` (the type of its result)")
    node = _function_node(fn)
    names = _namespace(fn)
    declared: list[Field] = []
    returns: tuple[str, ...] | None = None
    for i, stmt in enumerate(node.body):
        if (
            i == 0
            and isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str)
        ):
            continue
        if isinstance(stmt, ast.Pass) or (
            isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and stmt.value.value is Ellipsis
        ):
            continue
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and _is_out_call(stmt.value):
            assert stmt.value is not None
            spec = _evaluate(stmt.value, names, fn)
            if not isinstance(spec, Out):
                raise FunctionError(
                    f"{where}: line {stmt.lineno}: `{stmt.target.id}` is not declared with imp.out(...)"
                )
            annotation = _evaluate(stmt.annotation, names, fn)
            declared.append(Field(stmt.target.id, "output", annotation, spec.desc, default=spec.default))
            continue
        if isinstance(stmt, ast.Return) and returns is None:
            returns = _returned(stmt, [f.name for f in declared], where)
            continue
        raise FunctionError(
            f"{where}: line {getattr(stmt, 'lineno', '?')} (`{ast.unparse(stmt)[:60]}`): the body of a function "
            'program only declares outputs (`name: type = imp.out("...")`) and may `return` them; '
            "it is read, never run"
        )
    outputs = list(declared)
    result_type = hints["return"]
    if returns:
        _check_return_type(result_type, [next(f for f in declared if f.name == n) for n in returns], where)
    else:
        if result_type is type(None):
            raise FunctionError(f"{where}: `-> None` gives no result; annotate the type of the result")
        outputs.append(Field(RESULT, "output", result_type))
    clashes = sorted({f.name for f in outputs} & {f.name for f in inputs})
    if clashes:
        listed = ", ".join(f"`{n}`" for n in clashes)
        raise FunctionError(f"{where}: the output(s) {listed} have the name of an input; rename one of them")
    seen = [f.name for f in outputs]
    if len(set(seen)) != len(seen):
        raise FunctionError(f"{where}: two outputs are named {sorted({n for n in seen if seen.count(n) > 1})}")
    doc = instructions if instructions is not None else inspect.getdoc(fn)
    try:
        signature = Signature(inputs, outputs, doc or None, metadata={"function": fn.__name__}, name=fn.__name__)
    except SignatureError as exc:
        raise FunctionError(f"{where}: {exc}") from None
    return _Shape(signature, returns or None)


def _returned(stmt: ast.Return, declared: list[str], where: str) -> tuple[str, ...] | None:
    value = stmt.value
    if value is None or (isinstance(value, ast.Constant) and value.value is Ellipsis):
        return None
    items = value.elts if isinstance(value, ast.Tuple) else [value]
    names = [v.id for v in items if isinstance(v, ast.Name)]
    if len(names) != len(items) or any(n not in declared for n in names):
        raise FunctionError(
            f"{where}: line {stmt.lineno}: `{ast.unparse(stmt)}` returns something other than declared outputs; "
            "return declared outputs (`return verdict, score`), or nothing to return the annotated result"
        )
    return tuple(names)


def _check_return_type(annotation: object, fields: list[Field], where: str) -> None:
    if annotation is Any:
        return
    wanted: Any = fields[0].annotation if len(fields) == 1 else tuple[tuple(f.annotation for f in fields)]  # type: ignore[misc]
    if annotation != wanted:
        names = ", ".join(f.name for f in fields)
        raise FunctionError(
            f"{where}: it returns {names}, so its return annotation should be {_type_text(wanted)}, "
            f"not {_type_text(annotation)}"
        )


def _type_text(annotation: object) -> str:
    return getattr(annotation, "__name__", None) or repr(annotation).replace("typing.", "")


def _adapter(adapter: Adapter | AdapterName | None, template: Any) -> Adapter:
    if template is not None:
        if adapter is not None:
            raise TypeError("give either adapter= or template= (a template is the adapter), not both")
        return template if isinstance(template, TemplateAdapter) else TemplateAdapter(template)
    if adapter is None:
        return TAGGED
    if isinstance(adapter, Adapter):
        return adapter
    if isinstance(adapter, str) and adapter in ADAPTER_NAMES:
        return ADAPTER_NAMES[adapter]()
    raise TypeError(f"adapter= is 'chat', 'json', 'xml' or an imp.Adapter, got {adapter!r}")


@dataclass(frozen=True, eq=False)
class FunctionProgram(Program):
    """A typed function run by an LM: call it like the function, or `.predict(...)` for the Prediction."""

    fn: Callable[..., object]
    signature: Signature
    program: Program
    returns: tuple[str, ...] | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    handles_deadline: ClassVar[bool] = False
    resumable: ClassVar[bool] = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "handles_deadline", self.program.handles_deadline)
        object.__setattr__(self, "resumable", self.program.resumable)  # with tools=, its turn may pause
        for name in ("__module__", "__name__", "__qualname__", "__doc__"):
            object.__setattr__(self, name, getattr(self.fn, name, None))
        object.__setattr__(self, "__wrapped__", self.fn)

    @classmethod
    def build(cls, fn: Callable[..., object], **options: Any) -> FunctionProgram:
        """Read `fn` and build its program (`predict`, or `react` when `tools=` is given)."""
        unknown = sorted(set(options) - _OPTIONS)
        if unknown:
            raise TypeError(f"@imp.fn got unknown option(s) {unknown}; known: {sorted(_OPTIONS)}")
        if not callable(fn) or not inspect.isfunction(fn):
            raise FunctionError(f"@imp.fn decorates a function (def or async def), got {type(fn).__name__}")
        shape = _shape(fn, options.get("instructions"))
        adapter = _adapter(options.get("adapter"), options.get("template"))
        common: dict[str, Any] = {
            "lm": options.get("lm"),
            "adapter": adapter,
            "demos": tuple(options.get("demos") or ()),
            "config": dict(options.get("config") or {}),
            "adapter_opts": dict(options.get("adapter_opts") or {}),
            "validate": options.get("validate"),
            "max_retries": options.get("max_retries"),
        }
        tools = options.get("tools")
        program: Program
        if tools:
            from imp.programs.react import ReAct

            program = ReAct(
                shape.signature,
                tuple(tools),
                max_iters=options.get("max_iters", 20),
                extract_instructions=options.get("extract_instructions"),
                **common,
            )
        else:
            for name in ("max_iters", "extract_instructions"):
                if name in options:
                    raise TypeError(f"{name} applies to a function program with tools=")
            program = Predict(shape.signature, json_fallback=options.get("json_fallback", True), **common)
        if isinstance(program, Predict):
            pass  # Predict checks its adapter against its signature and demos itself
        else:
            from imp.programs.react import ReAct

            assert isinstance(program, ReAct)
            adapter.check(program.step_signature(program.finish))  # a loop step is what the template reads
        return cls(fn, shape.signature, program, shape.returns, dict(options))

    # --- values --------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The function's name."""
        return str(self.fn.__name__)

    @property
    def demos(self) -> tuple[Mapping[str, Any], ...]:
        """The worked examples sent before each request."""
        demos: tuple[Mapping[str, Any], ...] = getattr(self.program, "demos", ())
        return demos

    def using(self, **changes: object) -> FunctionProgram:
        """The same function with other options: `adapter`, `lm`, `template`, `tools`, `demos`, `config`..."""
        options = {**self.options, **changes}
        if "adapter" in changes and "template" not in changes:
            options.pop("template", None)
        if "template" in changes and "adapter" not in changes:
            options.pop("adapter", None)
        if not options.get("tools"):
            options.pop("max_iters", None)
            options.pop("extract_instructions", None)
        return FunctionProgram.build(self.fn, **options)

    def with_lm(self, lm: LM) -> FunctionProgram:
        """The same function program pinned to another LM."""
        inner: Program = self.program.with_lm(lm)  # type: ignore[attr-defined]
        return replace(self, program=inner, options={**self.options, "lm": lm})

    def with_demos(self, demos: Sequence[Mapping[str, object]]) -> FunctionProgram:
        """The same function program with other demos."""
        return self.using(demos=tuple(demos))

    def with_instructions(self, instructions: str) -> FunctionProgram:
        """The same function program with other instructions (the docstring stays on the function)."""
        return self.using(instructions=instructions)

    def parameters(self) -> Parameters:
        """Its inner program's: `predict`, or for a function with tools the loop's `react` and `extract`."""
        return self.program.parameters()

    def predictor_programs(self) -> list[tuple[str, Program]]:
        """Its inner program's."""
        return self.program.predictor_programs()

    def apply_parameters(self, changes: Changes) -> FunctionProgram:
        """The same function program with the optimizer's changes made to its inner program."""
        inner = self.program.apply_parameters(changes)
        options = {**self.options, "instructions": inner.signature.instructions}
        if hasattr(inner, "demos"):
            options["demos"] = inner.demos
        if hasattr(inner, "tools"):
            options["tools"] = inner.tools
        extract = getattr(inner, "extract_instructions", None)
        if extract is not None:  # a rewritten extractor outlives `using`
            options["extract_instructions"] = extract
        return replace(self, signature=inner.signature, program=inner, options=options)

    # --- running -------------------------------------------------------------------------

    def inputs(self, *args: object, **kwargs: object) -> dict[str, Any]:
        """The inputs of a call written like the function's (positional and keyword arguments)."""
        try:
            bound = inspect.signature(self.fn).bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self.name}(): {exc}") from None
        bound.apply_defaults()
        return dict(bound.arguments)

    async def acall(self, inputs: dict[str, Any], **call_options: object) -> Prediction:
        with program_label(self.name):
            return await self.program.acall(inputs, **call_options)

    def _value(self, prediction: Prediction) -> object:
        names = self.returns or (RESULT,)
        unanswered = [n for n in names if prediction.fields.get(n) is None and not self.signature.outputs[n].optional]
        if not prediction.complete or unanswered:
            reason = prediction.metadata.termination_reason or "no value"
            raise ImpError(
                f"{self.name}: the turn ended without an answer ({reason}); "
                f"{self.name}.predict(...) returns the whole, incomplete prediction"
            )
        if self.returns is None:
            return prediction.fields[RESULT]
        if len(self.returns) == 1:
            return prediction.fields[self.returns[0]]
        return tuple(prediction.fields[n] for n in self.returns)

    def __call__(self, *args: object, **kwargs: object) -> Any:
        inputs = self.inputs(*args, **kwargs)
        if inspect.iscoroutinefunction(self.fn):
            return self._acall_value(inputs)
        return self._value(self._sync(inputs))

    async def _acall_value(self, inputs: dict[str, Any]) -> object:
        from imp.programs.base import call

        return self._value(await call(self, inputs))

    def predict(self, *args: object, **kwargs: object) -> Prediction | Awaitable[Prediction]:
        """The whole Prediction (all outputs, usage, metadata); awaitable for an `async def`."""
        inputs = self.inputs(*args, **kwargs)
        if inspect.iscoroutinefunction(self.fn):
            from imp.programs.base import call

            return call(self, inputs)
        return self._sync(inputs)

    def _sync(self, inputs: dict[str, Any]) -> Prediction:
        # Inside a running loop (a notebook cell) `call_sync` runs the call on a helper thread.
        return call_sync(self, inputs)

    def __repr__(self) -> str:
        outputs = ", ".join(self.signature.outputs)
        return f"FunctionProgram({self.name}: {', '.join(self.signature.inputs)} -> {outputs})"


def fn(function: Callable[..., object] | None = None, /, **options: object) -> Any:
    """Make a typed function a program: `@imp.fn`, or `@imp.fn(lm=..., adapter=..., template=..., tools=[...])`."""
    if function is None:
        return lambda f: FunctionProgram.build(f, **options)
    return FunctionProgram.build(function, **options)
