"""Every command's `--help` example is printed on one line, whatever the terminal's
width (issue 29): click re-wraps help paragraphs to the width, which split
`--failure quota_exhausted` over two lines, and a pasted example then failed."""

from __future__ import annotations

import click
import typer

from quotaledger.cli.main import build_app
from tests.support import run_cli


def _examples() -> dict[tuple[str, ...], str]:
    """Each command's path (`host return`) and the example its help gives."""
    found: dict[tuple[str, ...], str] = {}

    def walk(command: click.Command, path: tuple[str, ...]) -> None:
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                walk(sub, (*path, name))
            return
        help_text = command.help or ""
        if "Example:" in help_text:
            example = help_text.split("Example:", 1)[1].replace("\b", "").strip()
            found[path] = example.splitlines()[0].strip()

    walk(typer.main.get_command(build_app()), ())
    return found


def test_every_help_example_is_one_pasteable_line_at_any_width() -> None:
    examples = _examples()
    assert len(examples) > 30 and ("host", "return") in examples
    long = [path for path, example in examples.items() if len(example) > 60]
    assert long  # the check below means something: these would be wrapped at 60
    for path, example in examples.items():
        assert example.startswith("quotaledger " + " ".join(path)), (path, example)
        printed = run_cli(*path, "--help", env={"COLUMNS": "60"})
        assert printed.code == 0, printed.stderr
        lines = [line.strip() for line in printed.stdout.splitlines()]
        assert example in lines, (path, printed.stdout)
