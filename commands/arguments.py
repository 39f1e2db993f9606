"""The Python API's argument check: every public `Ledger` method is keyword-only and
typed, and a value of the wrong type raises `InvalidInput` naming the parameter at
the boundary, never a bare TypeError from deep inside.

The rule is read from each method's own annotations (one source: the signature
mypy checks is the signature enforced at run time). Each method's checks are built
on its first call, so importing the API (the CLI does, once per event) costs nothing.
"""

from __future__ import annotations

import datetime as dt
import functools
import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from quotaledger.journal import codes
from quotaledger.journal.clock import format_us
from quotaledger.journal.errors import InvalidInput

F = TypeVar("F", bound=Callable[..., Any])

# Parameters that name a moment: they take an aware datetime or an RFC 3339 string
# (the string is checked by the command itself, exactly as the CLI's).
TIME_PARAMETERS = frozenset({"at", "since", "until", "deadline"})

Check = Callable[[str, Any], Any]


def _integer(name: str, value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise _wrong(name, value, "an integer")


def _number(name: str, value: Any) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidInput(
                f"{name} must be a finite number, not {value!r}",
                code=codes.INVALID_ARGUMENT,
                parameter=name,
            )
        return value
    raise _wrong(name, value, "a number")


def _of(kind: type, label: str) -> Check:
    def check(name: str, value: Any) -> Any:
        if isinstance(value, kind):
            return value
        raise _wrong(name, value, label)

    return check


def _strings(name: str, value: Any) -> Any:
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        for item in value:
            if not isinstance(item, str):
                raise _wrong(name, item, "a sequence of strings (an item is not)")
        return value
    raise _wrong(name, value, "a sequence of strings")


_CHECKS: dict[str, tuple[Check, str]] = {
    "str": (_of(str, "a string"), "a string"),
    "int": (_integer, "an integer"),
    "float": (_number, "a number"),
    "bool": (_of(bool, "true or false"), "true or false"),
    "bytes": (_of(bytes, "bytes"), "bytes"),
    "Sequence[str]": (_strings, "a sequence of strings"),
    "list[str]": (_strings, "a sequence of strings"),
}


def _wrong(name: str, value: Any, expected: str) -> InvalidInput:
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return InvalidInput(
        f"{name} must be {expected}, not {type(value).__name__} {shown}",
        code=codes.INVALID_ARGUMENT,
        parameter=name,
    )


def _moment(name: str, value: Any) -> Any:
    if isinstance(value, dt.datetime):
        offset = value.utcoffset()
        if offset is None:
            raise InvalidInput(
                f"{name} must be an aware datetime (with a time zone), not {value!r}",
                code=codes.INVALID_ARGUMENT,
                parameter=name,
            )
        naive = value.replace(tzinfo=None) - offset
        delta = naive - dt.datetime(1970, 1, 1)
        return format_us(delta // dt.timedelta(microseconds=1))
    if isinstance(value, str):
        return value
    raise _wrong(name, value, "an aware datetime or an RFC 3339 string")


def _parameter_check(name: str, annotation: str) -> Check | None:
    """The check for one parameter, or None when its type is not a plain value."""
    alternatives = [part.strip() for part in annotation.split("|")]
    optional = "None" in alternatives
    kinds = [part for part in alternatives if part != "None"]
    if name in TIME_PARAMETERS and kinds == ["str"]:
        inner: Check = _moment
    elif len(kinds) == 1 and kinds[0] in _CHECKS:
        inner = _CHECKS[kinds[0]][0]
    elif kinds and all(kind in _CHECKS for kind in kinds):
        checks = [_CHECKS[kind] for kind in kinds]
        expected = " or ".join(label for _, label in checks)

        def inner(name: str, value: Any) -> Any:
            for check, _ in checks:
                try:
                    return check(name, value)
                except InvalidInput:
                    continue
            raise _wrong(name, value, expected)
    else:
        return None  # an object the method checks itself (a Progress, a Record, ...)
    if not optional:
        return inner

    def maybe(name: str, value: Any) -> Any:
        return None if value is None else inner(name, value)

    return maybe


_PASSING_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "float": (int,),  # a float must also be finite: it takes the check
    "bool": (bool,),
    "bytes": (bytes,),
}
"""The exact types each kind's check returns unchanged, so a value of one needs no call
(a bool is never an exact int; a subclass of str, or a float, takes the check)."""


def _passing_types(annotation: str) -> frozenset[type]:
    """The exact types of values `_parameter_check(name, annotation)` returns as they
    are: a time parameter's string too (the command checks it)."""
    alternatives = [part.strip() for part in annotation.split("|")]
    found: set[type] = {type(None)} if "None" in alternatives else set()
    for kind in alternatives:
        found.update(_PASSING_TYPES.get(kind, ()))
    return frozenset(found)


def _rules_for(method: Callable[..., Any]) -> dict[str, tuple[Check, frozenset[type]]]:
    """Each checked parameter's check, and the exact types it passes unchanged."""
    rules: dict[str, tuple[Check, frozenset[type]]] = {}
    for parameter in inspect.signature(method).parameters.values():
        annotation = parameter.annotation
        if not isinstance(annotation, str):
            continue
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            # `**fields: Unpack[SomeTypedDict]`: each key of the TypedDict is a keyword.
            named = _typed_keywords(method, annotation)
        else:
            named = {parameter.name: annotation}
        for name, inner in named.items():
            check = _parameter_check(name, inner)
            if check is not None:
                rules[name] = (check, _passing_types(inner))
    return rules


def _typed_keywords(method: Callable[..., Any], annotation: str) -> dict[str, str]:
    if not (annotation.startswith("Unpack[") and annotation.endswith("]")):
        return {}
    typed = eval(annotation[len("Unpack[") : -1], method.__globals__)  # a name, not input
    hints = getattr(typed, "__annotations__", {})
    # A TypedDict keeps each annotation as a ForwardRef (or a str); its text is the rule.
    return {
        name: hint if isinstance(hint, str) else getattr(hint, "__forward_arg__", "")
        for name, hint in hints.items()
    }


class LedgerClosed(InvalidInput):
    code = codes.LEDGER_CLOSED


def checked(method: F) -> F:
    """`method` with its keyword arguments checked against its annotations, and
    refused on a closed ledger."""
    rules: dict[str, tuple[Check, frozenset[type]]] | None = None
    nothing: tuple[None, frozenset[type]] = (None, frozenset())

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal rules
        if self.closed:
            raise LedgerClosed(f"the ledger is closed; {method.__name__}() needs an open one")
        if args:
            raise InvalidInput(
                f"{method.__name__}() takes keyword arguments only (got {len(args)} positional)",
                code=codes.INVALID_ARGUMENT,
            )
        if rules is None:
            rules = _rules_for(method)
        for name, value in kwargs.items():
            check, passing = rules.get(name, nothing)
            # Most values are of a type their check returns as it is: no call (every
            # durable append's API call checks five or more).
            if check is not None and type(value) not in passing:
                kwargs[name] = check(name, value)
        try:
            return method(self, **kwargs)
        except TypeError as error:
            # A missing or unknown keyword: the caller's mistake, said plainly.
            if _is_call_error(error, method):
                raise InvalidInput(str(error), code=codes.INVALID_ARGUMENT) from None
            raise

    return call  # type: ignore[return-value]


def _is_call_error(error: TypeError, method: Callable[..., Any]) -> bool:
    """Whether `error` was raised by binding the call itself (not from inside)."""
    tb = error.__traceback__
    return tb is not None and tb.tb_next is None and method.__name__ in str(error)
