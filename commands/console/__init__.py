"""What the two command lines share (the typer CLI, `cli/`, and the typer-free one,
`lean/`): a call's context and checks (`context`), the per-event commands' bodies
(`per_event`), input files and stdin (`inputs`), strict numbers (`numbers`), writing
to stdout (`printing`) and start-up without the cycle collector (`collector`).
"""
