"""The `runledger` CLI (typer) and the application services behind it.

`commands.api.Runledger` is the in-process Python API; each CLI command is a thin
layer over one of its methods.
"""
