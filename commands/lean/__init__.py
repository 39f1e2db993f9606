"""The typer-free command line (SPEC §9, §11): a runner's per-event command on a local
journal (`local`), and any served command as a client of `quotaledger serve`
(`remote_call`), both read with the table generated from the typer app (`grammar`,
`command_line`); `dispatch` says which runs, else the typer CLI does.
"""
