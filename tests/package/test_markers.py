"""The `slow` marker labels every real-process race and crash test (pyproject's
markers), so `-m 'not slow'` is a quick inner loop and CI still runs them all.
Read from the source: a test named for a race, a kill or concurrency is one."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RACE_OR_CRASH = re.compile(r"(?:^|_)(?:races?|racing|concurrent\w*|kill\w*|sigkill\w*)(?:_|$)")
NOT_A_RACE = {"test_killed_by_a_signal_is_128_plus_the_signal"}  # the probe reports a signal


def _marked_slow(node: ast.FunctionDef) -> bool:
    return any(ast.unparse(d) == "pytest.mark.slow" for d in node.decorator_list)


def test_every_race_and_crash_test_is_marked_slow() -> None:
    unmarked = []
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        if path == Path(__file__).resolve():
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if (
                isinstance(node, ast.FunctionDef)
                and node.name.startswith("test_")
                and RACE_OR_CRASH.search(node.name)
                and node.name not in NOT_A_RACE
                and not _marked_slow(node)
            ):
                unmarked.append(f"{path.relative_to(REPO)}::{node.name}")
    assert not unmarked, unmarked
