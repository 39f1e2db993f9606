"""`quotaledger serve` (SPEC §11): one process owning the fold, group commit, an HTTP API.

- `committer`: the one thread that decides every request in arrival order and makes
  each group of writers durable with one write and one fdatasync (or one COMMIT);
- `routes`: which use case a request names and its decoded request (HTTP in, typed out);
- `app`: the ASGI application (auth, limits, status codes, /metrics, /report, ...);
- `readers`: passes over the journal (audit, what-if, log, report) on their own handles;
- `protocol`: the HTTP server library's protocol with the limits SPEC sets;
- `listening`: the socket, the library's configuration and signals (also `metrics --listen`);
- `openapi`: the OpenAPI document, generated from the request and answer types;
- `telemetry`: the server's own Prometheus families;
- `run`: the process (listen, signals, exit status).

Nothing here is imported by a command that does not serve.
"""

LISTEN_DEFAULT = "127.0.0.1:8765"
"""Where `serve` listens unless told: loopback, so no token is needed."""
