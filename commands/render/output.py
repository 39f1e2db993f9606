"""Printing results and errors: the one place that maps outcomes to exit codes.

A command returns a JSON-ready dict (`{"ok": ...}`) or an `Output`; an expected
failure is a `journal.Error`. `exit_code_of` turns either into its exit code (SPEC
§8): 0 ok (idempotent replays included), 1 a decision refused, and for an error the
`exit_code` of its class, which the error tree in journal/errors.py states (2 invalid
input, 3 journal corrupt, 4 I/O failure): every exit code the CLI gives comes from here.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

import msgspec

from quotaledger.journal.errors import Error
from quotaledger.render.outcome import EXIT_OK, EXIT_REFUSED, error_body, error_line, exit_code_of
from quotaledger.usecases.decode import CLI, Answer


class Output(msgspec.Struct):
    """A command's result: the answer (or a JSON-ready dict), optional human text,
    optional exit code."""

    data: Answer | dict[str, Any]
    text: str | None = None
    exit_code: int | None = None
    on_stderr: bool = False
    """The answer goes to stderr, JSON included: stdout carries the command's data
    (`export --to -`)."""


class Shown(msgspec.Struct, frozen=True):
    """What a command's printed answer needs besides its request and answer: the
    journal as the user named it (a printed follow-up command names it), and the
    options that change only the text (`TEXT_OPTIONS`). `serve` prints a CLI client's
    answer with the same functions (render/answers.py, SPEC §11)."""

    journal_target: str
    verbose: bool = False


TEXT_OPTIONS = ("verbose",)
"""The options of served commands that change only the printed text: a CLI client
sends them beside its request (`Shown`)."""


def write_json(body: Answer | dict[str, Any], stream: TextIO | None = None) -> None:
    """One compact JSON object and a newline on `stream` (stdout), as UTF-8.

    msgspec, which every command has loaded, rather than the standard library's json,
    whose import alone costs each CLI call about a millisecond."""
    line = json_line(body)
    stream = sys.stdout if stream is None else stream
    buffer = getattr(stream, "buffer", None)
    if buffer is None:  # a text-only stream (a test's StringIO)
        stream.write(line.decode())
    else:  # JSON is UTF-8 (RFC 8259) whatever the locale's encoding
        stream.flush()
        buffer.write(line)
        stream.flush()


def json_line(body: Answer | dict[str, Any]) -> bytes:
    """One compact JSON object and a newline, as UTF-8. A string UTF-8 cannot hold (a
    lone surrogate from undecodable argv bytes) takes json's \\u escapes."""
    try:
        return msgspec.json.encode(body, enc_hook=str) + b"\n"
    except UnicodeEncodeError:
        import json

        plain = msgspec.to_builtins(body) if isinstance(body, Answer) else body
        return (json.dumps(plain, separators=(",", ":"), default=str) + "\n").encode()


def emit(result: Output | Answer | dict[str, Any], *, as_json: bool) -> int:
    output = result if isinstance(result, Output) else Output(result)
    code = output_code(output)
    if as_json:
        stream = sys.stderr if output.on_stderr else sys.stdout
        write_json(output.data, stream)
    else:
        stream = sys.stderr if text_on_stderr(output, code) else sys.stdout
        stream.write(printed_text(output))
    sys.stdout.flush()
    return code


def output_code(output: Output) -> int:
    return output.exit_code if output.exit_code is not None else exit_code_of(output.data)


def printed_text(output: Output) -> str:
    """The text `emit` prints without --json, its last newline included ("" for none)."""
    text = output.text
    if text is None:
        data = output.data
        text = render_text(msgspec.to_builtins(data) if isinstance(data, Answer) else data)
    if not text:
        return ""
    return text if text.endswith("\n") else text + "\n"


def text_on_stderr(output: Output, code: int) -> bool:
    """Text goes to stdout for an answer (exit 0 or 1), else (or if the output says
    so) to stderr; a CLI client of a server prints it where `emit` would."""
    return output.on_stderr or code not in (EXIT_OK, EXIT_REFUSED)


def emit_error(error: Error, *, as_json: bool) -> int:
    """An error as the CLI words it: a parameter the engine names (`at`) by its flag."""
    if as_json:
        write_json(error_body(error.to_json(CLI)))
        sys.stdout.flush()
    else:
        sys.stderr.write(error_line(error.worded(CLI), error.code))
    return exit_code_of(error)


def render_text(data: dict[str, Any], indent: int = 0) -> str:
    """A concise, indented rendering of a JSON result for people."""
    lines: list[str] = []
    pad = "  " * indent
    for key, value in data.items():
        if key == "ok" and indent == 0:
            continue
        if isinstance(value, dict) and value:
            lines.append(f"{pad}{key}:")
            lines.append(render_text(value, indent + 1))
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            lines.append(f"{pad}{key}:")
            for item in value:
                inner = render_text(item, indent + 2).lstrip()
                lines.append(f"{pad}  - {inner}")
        elif isinstance(value, list):
            lines.append(f"{pad}{key}: {', '.join(map(str, value)) if value else '-'}")
        else:
            lines.append(f"{pad}{key}: {_scalar(value)}")
    if indent == 0 and data.get("ok") is False and "reasons" in data:
        lines.insert(0, "REFUSED: " + ", ".join(map(str, data["reasons"])))
    return "\n".join(line for line in lines if line)


def _scalar(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """'1 decision', '2 decisions' (`nouns` for an irregular plural)."""
    return f"{count:,} {noun if count == 1 else nouns or noun + 's'}"


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=False)]
    out = [" ".join(str(c).ljust(w) for c, w in zip(header, widths, strict=False)).rstrip()]
    for row in rows:
        out.append(" ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=False)).rstrip())
    return "\n".join(out)
