"""A command's options made from its request type: each field's flag, type, default
and help are the field's own (its `msgspec.Meta(description=...)`), so `--help`, the
API's docstrings and /openapi.json say the same thing.

    @commands("admit", example=...)
    @request_options(AdmitRequest)
    def admit(ctx: Ctx, options: RequestOptions) -> Output:
        return per_event.admit(ctx, options)

The decorator puts one option per request field where the `options` parameter
stands, in the request's field order, and hands them to the command gathered in
that one dict (as `cli.config_options` does for the config fields). What is the
CLI's alone is said here: a `FILE|-` option (`inputs`: the CLI reads the file or
standard input itself), a metavar, and the fields the CLI does not take (`api_only`).
A field's flag is `usecases.decode.CLI`'s (`class_` is `--class`).
"""

import functools
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any

import msgspec
import typer

from quotaledger.cli.common import choice_option, duration_option
from quotaledger.usecases.decode import CLI, Request, description_of

RequestOptions = dict[str, Any]
"""The request's options a command was given, by field name (None: not given)."""

STDIN_HELP = "A file, or - for stdin."


def _metas(hint: Any) -> list[msgspec.Meta]:
    """Every Meta in the annotation, looking through `X | None`."""
    found = [m for m in getattr(hint, "__metadata__", ()) if isinstance(m, msgspec.Meta)]
    for inner in typing.get_args(hint):
        found += _metas(inner)
    return found


def _base(hint: Any) -> Any:
    """The plain type under the annotations and `| None` (int, float, str, bool, ...)."""
    if typing.get_origin(hint) is Annotated:
        return _base(typing.get_args(hint)[0])
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        kinds = [_base(a) for a in typing.get_args(hint) if a is not type(None)]
        if set(kinds) == {int, float}:  # a number that may be fractional (dollars)
            return float
        return kinds[0] if len(kinds) == 1 else Any
    return hint


def _choices(hint: Any) -> tuple[str, ...] | None:
    return next(
        (m.extra["choices"] for m in _metas(hint) if m.extra and "choices" in m.extra), None
    )


def option_help(description: str, default: Any) -> str:
    """The help line: the description, and a default that is a value (None and False
    say nothing: not given)."""
    if default is None or default is False or default is msgspec.NODEFAULT:
        return description
    return f"{description.removesuffix('.')} [default: {default}]."


def _option(
    name: str, hint: Any, default: Any, *, stdin: bool, metavar: str | None
) -> inspect.Parameter:
    description = description_of(hint)
    assert description is not None, f"the request field {name} has no description"
    flag, base, choices = CLI(name), _base(hint), _choices(hint)
    text = option_help(description, default)
    required = default is msgspec.NODEFAULT
    kind: Any = base if required or base is bool else base | None
    if stdin:
        kind, option = str | None, typer.Option(flag, metavar="FILE|-", help=f"{text} {STDIN_HELP}")
    elif choices is not None:
        option = choice_option(flag, choices, text)
    elif name.endswith("_s") and base in (int, float):  # seconds: a duration too (SPEC §8)
        option = duration_option(flag, text, whole=base is int)
    else:
        option = typer.Option(flag, help=text, metavar=metavar, show_default=False)
    return inspect.Parameter(
        name,
        inspect.Parameter.KEYWORD_ONLY,
        default=inspect.Parameter.empty if required else default,
        annotation=Annotated[kind, option],
    )


def request_options(
    request_type: type[Request],
    *,
    inputs: tuple[str, ...] = (),
    metavars: Mapping[str, str] | None = None,
    api_only: tuple[str, ...] = (),
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Replace the command's `options` parameter with its request's fields as options."""
    hints = typing.get_type_hints(request_type, include_extras=True)
    fields = msgspec.structs.fields(request_type)
    names = [f.name for f in fields if f.name not in api_only]
    assert set(inputs) <= set(names) and set(metavars or {}) <= set(names)
    params = [
        _option(
            f.name,
            hints[f.name],
            f.default,
            stdin=f.name in inputs,
            metavar=(metavars or {}).get(f.name),
        )
        for f in fields
        if f.name not in api_only
    ]

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(func)
        own: list[inspect.Parameter] = []
        for param in signature.parameters.values():
            own += params if param.name == "options" else [param]

        @functools.wraps(func)
        def gathered(*args: Any, **kwargs: Any) -> Any:
            options = {name: kwargs.pop(name) for name in names}
            return func(*args, options=options, **kwargs)

        del gathered.__wrapped__  # `command` and typer must see the new signature
        gathered.__signature__ = signature.replace(parameters=own)  # type: ignore[attr-defined]
        return gathered

    return decorate
