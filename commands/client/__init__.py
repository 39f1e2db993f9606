"""The HTTP client of `quotaledger serve` (SPEC §11): `http`, one keep-alive HTTP/1.1
connection (a socket, httptools' parser) and the protocol's header names, which the
remote Ledger (`quotaledger.remote`) and the lean CLI's client (`lean.remote_call`)
share.
"""
