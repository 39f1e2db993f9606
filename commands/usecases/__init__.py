"""One request type and one answer type per use case (SPEC §8, §11).

A request is a frozen msgspec Struct whose field constraints carry the limits; it
is decoded once wherever a request enters (CLI options, the Python API's keyword
arguments, an HTTP body) by `usecases.decode.decode`, which turns a violated
constraint into the same `InvalidInput` for every caller, naming the value in the
caller's words (`--goal` for the CLI, `goal` for the API). An answer is a Struct
whose field order is the JSON key order; a key that only some answers carry is
`UNSET` when absent. Services take the request and return the answer; the CLI
renders text from the typed answer, `--json` encodes it, and the API returns it as
builtins (the dict `--json` prints).

`usecases.registry` lists every use case with its request and answer types and
whether it writes, the one table the API, the server and the OpenAPI document read.
Modules here define Structs, so they keep annotations evaluated (no
`from __future__ import annotations`; see projections/types.py).
"""
