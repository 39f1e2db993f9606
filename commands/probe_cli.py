"""Placeholder: the probe commands are being built (their issue owns this module)."""

import typer


def register(app: typer.Typer) -> None:
    """Add this domain's commands to the runledger app."""
