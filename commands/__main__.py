"""`python -m commands ...` runs the CLI (used by tests that spawn real processes)."""

from commands.cli import main

main()
