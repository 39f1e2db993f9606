"""`quotaledger serve`: one process owning the fold, the HTTP API over it (SPEC §11).

Imported only by `quotaledger serve`: no other command loads the HTTP server, the
Prometheus client or the asyncio machinery (tests/cli/test_command_modules.py).
"""
