"""Follow-up commands the CLI prints for the user to run (SPEC §8; issue 29).

A printed command is meant to be pasted: it is complete (every option the command
requires, filled from what the journal knows), quoted for a POSIX shell, names the
program, and names the journal by a path that means the same from any directory (an
absolute path; a server or PostgreSQL URL as given, without a password). Only the
default journal goes unnamed, as SPEC §8 says.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from quotaledger.journal.target import follow_up_journal, is_remote_target

if TYPE_CHECKING:
    from quotaledger.usecases.host import Attempt

PROGRAM = "quotaledger"

CONTINUE_DEADLINE = "+1h"
"""The deadline a printed `host continue` proposes: relative, so it is never in the
past when pasted, and well inside the default --max-phase of 7d."""


def journal_words(target: str) -> list[str]:
    """The `--journal` words that name this journal from anywhere (none: the default)."""
    if is_remote_target(target):
        return ["--journal", target]
    return follow_up_journal(target)[0]


def command_line(words: list[str], journal: list[str]) -> str:
    """`quotaledger WORDS... --journal J`, quoted for a POSIX shell."""
    return shlex.join([PROGRAM, *words, *journal])


def continue_line(goal: str, attempt: Attempt, bind: str, journal: list[str]) -> str:
    """The `host continue` that binds this failed attempt's return, on its session and
    profile, at the cursor it returned with."""
    words = ["host", "continue", "--goal", goal, "--lane", attempt.lane, "--bind", bind]
    words += ["--deadline", CONTINUE_DEADLINE, "--session", attempt.session]
    words += ["--profile", attempt.profile]
    if attempt.cursor is not None:
        words += ["--cursor", attempt.cursor]
    return command_line(words, journal)


def status_line(goal: str, lane: str | None, journal: list[str]) -> str:
    words = ["host", "status", "--goal", goal] + (["--lane", lane] if lane else [])
    return command_line(words, journal)


def audit_line(seq: int, journal: list[str]) -> str:
    return command_line(["audit", "--seq", str(seq)], journal)
