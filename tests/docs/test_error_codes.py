"""Every error code is a constant of journal/codes.py, documented once with its exit code.

The sources are read as syntax trees: a raise site that spells its code as a string
literal fails here, so a code is renamed in one place. docs/errors.md is the reference a
user reads; the codes there are exactly the constants, and each one's exit code is the
one its raising class gives (journal/errors.py). The codes SPEC names are checked
against SPEC's own exit codes.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import quotaledger.projections.types
from quotaledger.journal import codes, errors

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted(
    path
    for folder in ("commands", "journal", "projections")
    for path in (ROOT / folder).rglob("*.py")
    if path != ROOT / "journal" / "codes.py"
)
CONSTANTS = {
    name: value for name, value in vars(codes).items() if name.isupper() and isinstance(value, str)
}
DOCUMENTED = {
    code: int(exit_code)
    for code, exit_code in re.findall(
        r"^\| `([a-z0-9_]+)` \| (\d) \|",
        (ROOT / "docs" / "errors.md").read_text(encoding="utf-8"),
        re.M,
    )
}
# The error codes SPEC names, with the exit code it gives each (§2.2, §2.3, §2.4, §2.5,
# §3, §7, §8). SPEC lists no other code; the rest are ours, documented in docs/errors.md.
SPEC_CODES = {
    "time_regression": 2,
    "time_in_future": 2,
    "unknown_goal": 2,
    "invalid_provider_headers": 2,
    "journal_corrupt": 3,
    "not_a_journal": 3,
    "journal_replaced": 3,
    "checkpoint_mismatch": 3,
    "journal_poisoned": 4,
}


def _error_classes() -> dict[str, type[errors.Error]]:
    assert quotaledger.projections.types  # its classes load
    found: dict[str, type[errors.Error]] = {}
    pending: list[type[errors.Error]] = [errors.Error]
    while pending:
        cls = pending.pop()
        found[cls.__name__] = cls
        pending.extend(cls.__subclasses__())
    return found


def _literal_codes(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, source) of every code given as a literal: `code="x"` in a call, or
    `code = "x"` (a class attribute, a variable) whose value holds a string."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg == "code" and _holds_string(keyword.value):
                    found.append((node.lineno, ast.unparse(keyword)))
        elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            named = [t.id if isinstance(t, ast.Name) else getattr(t, "attr", "") for t in targets]
            if "code" in named and _holds_string(node.value):
                found.append((node.lineno, ast.unparse(node)))
    return found


def _holds_string(node: ast.AST) -> bool:
    """Whether the expression can evaluate to a string written in it: a literal, an
    f-string, or either branch of `a if c else b` / `a or b` (not a call's argument
    or a subscript's key, which say where a value comes from)."""
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.IfExp):
        return _holds_string(node.body) or _holds_string(node.orelse)
    if isinstance(node, ast.BoolOp):
        return any(_holds_string(value) for value in node.values)
    return False


def _raise_sites() -> list[tuple[str, str, str]]:
    """(where, class name, constant name) of every `Cls(..., code=codes.X)`."""
    sites: list[tuple[str, str, str]] = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            for keyword in node.keywords:
                value = keyword.value
                if (
                    keyword.arg == "code"
                    and isinstance(value, ast.Attribute)
                    and isinstance(value.value, ast.Name)
                    and value.value.id == "codes"
                ):
                    where = f"{path.relative_to(ROOT)}:{node.lineno}"
                    sites.append((where, ast.unparse(node.func), value.attr))
    return sites


def test_no_source_spells_an_error_code_as_a_literal() -> None:
    literal = [
        f"{path.relative_to(ROOT)}:{line}: {text}"
        for path in SOURCES
        for line, text in _literal_codes(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert not literal, "codes go through journal/codes.py:\n" + "\n".join(literal)


def test_the_scan_sees_a_literal_code() -> None:
    # The scan above proves something only if it would find one.
    tree = ast.parse(
        'raise InvalidInput("m", code="x")\n'
        'class E:\n    code = "y"\n'
        'code = codes.A if n else "z"\n'
        "raise Error(m, code=codes.B)\n"
        'code = getattr(e, "code", codes.C)\n'
    )
    assert sorted(line for line, _ in _literal_codes(tree)) == [1, 3, 4]


def test_every_raise_site_names_a_defined_constant() -> None:
    unknown = [
        f"{where}: codes.{name}" for where, _, name in _raise_sites() if name not in CONSTANTS
    ]
    assert not unknown, unknown
    assert len(_raise_sites()) > 100  # the scan found the raise sites at all


def test_codes_are_unique_snake_case_named_after_their_value() -> None:
    assert len(set(CONSTANTS.values())) == len(CONSTANTS)
    for name, value in CONSTANTS.items():
        assert re.fullmatch(r"[a-z][a-z0-9_]*", value), name
        assert name == value.upper(), (name, value)


def test_the_reference_lists_every_code_and_no_other() -> None:
    constants = set(CONSTANTS.values())
    assert set(DOCUMENTED) == constants, (
        f"undocumented: {sorted(constants - set(DOCUMENTED))}; "
        f"not a code: {sorted(set(DOCUMENTED) - constants)}"
    )


def test_each_documented_exit_code_is_the_raising_class_s() -> None:
    classes = _error_classes()
    # OptionError is click's (a bad option value): main() turns its code into an
    # InvalidInput, so it exits as one.
    raising = {**classes, "OptionError": errors.InvalidInput}
    wrong = [
        f"{where}: {name} -> exit {raising[cls].exit_code}, documented {DOCUMENTED[value]}"
        for where, cls, name in _raise_sites()
        if cls in raising
        and (value := CONSTANTS[name]) in DOCUMENTED
        and raising[cls].exit_code != DOCUMENTED[value]
    ]
    wrong += [
        f"{cls.__name__}.code {cls.code} -> exit {cls.exit_code}, documented "
        f"{DOCUMENTED.get(cls.code)}"
        for cls in classes.values()
        if DOCUMENTED.get(cls.code) != cls.exit_code
    ]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(("code", "exit_code"), sorted(SPEC_CODES.items()))
def test_each_code_spec_names_is_a_constant_with_spec_s_exit_code(
    code: str, exit_code: int
) -> None:
    assert code in CONSTANTS.values()
    assert DOCUMENTED[code] == exit_code


def test_the_error_tree_drawn_in_errors_py_matches_the_classes() -> None:
    # The drawing states each class's exit code again, for a reader: it must agree.
    drawn = {name: int(code) for name, code in re.findall(r"(\w+)\s+(\d)  ", errors.__doc__ or "")}
    assert drawn == {
        name: cls.exit_code
        for name, cls in _error_classes().items()
        if cls.__module__ == errors.__name__ and cls is not errors.Error
    }
