"""A client of `quotaledger serve` that loads only what a call needs (SPEC §9, §11).

`http`: one keep-alive HTTP/1.1 connection (a socket, httptools' parser). `lean`: the
CLI's commands run against a server's URL without typer, the engine or the
projections: argv read with `grammar` (generated from the typer app), the request
sent as JSON, the answer printed as the server rendered it for the CLI.
"""
