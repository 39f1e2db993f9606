"""The environment variables quotaledger reads (SPEC §2.2, §8, §11), named once.

Every reader names its variable with these constants, so a name in a message, a help
text or a lookup cannot drift from the one the SPEC gives. Each says where it is read.
This module imports nothing: the lean CLI client reads it on every call.
"""

JOURNAL_ENV = "QUOTALEDGER_JOURNAL"
"""The journal (a file, a postgresql:// URL or a server's URL) when `--journal` is not
given: the CLI's option, and the lean CLI's choice between local and remote."""
JSON_ENV = "QUOTALEDGER_JSON"
"""`--json` when neither `--json` nor `--no-json` is given (a boolean, as click reads it)."""
LOCK_TIMEOUT_S_ENV = "QUOTALEDGER_LOCK_TIMEOUT_S"
"""`--lock-timeout-s` when it is not given."""
MAX_CLOCK_SKEW_S_ENV = "QUOTALEDGER_MAX_CLOCK_SKEW_S"
"""How far ahead of the wall clock a writer's explicit time may be (journal/clock.py)."""
TOKEN_ENV = "QUOTALEDGER_TOKEN"
"""The bearer token a client of a server sends (never an argument: it would show in
`ps`)."""

# The inspect_ai hooks (quotaledger.adapters.inspect_ai, SPEC §13.1), read by
# adapters.inspect_names on every sample: the goal (set, the hooks are enabled), the
# admission's arm, lease and forecasts, and how long a sample may wait in the queue.
INSPECT_GOAL_ENV = "QUOTALEDGER_INSPECT_GOAL"
INSPECT_ARM_ENV = "QUOTALEDGER_INSPECT_ARM"
INSPECT_LEASE_S_ENV = "QUOTALEDGER_INSPECT_LEASE_S"
INSPECT_WAIT_S_ENV = "QUOTALEDGER_INSPECT_WAIT_S"
INSPECT_FORECAST_ENV: dict[str, str] = {
    "forecast_tpm": "QUOTALEDGER_INSPECT_FORECAST_TPM",
    "forecast_itpm": "QUOTALEDGER_INSPECT_FORECAST_ITPM",
    "forecast_otpm": "QUOTALEDGER_INSPECT_FORECAST_OTPM",
    "forecast_rpm": "QUOTALEDGER_INSPECT_FORECAST_RPM",
    "forecast_tokens": "QUOTALEDGER_INSPECT_FORECAST_TOKENS",
    "forecast_requests": "QUOTALEDGER_INSPECT_FORECAST_REQUESTS",
    "forecast_usd": "QUOTALEDGER_INSPECT_FORECAST_USD",
}
"""Each forecast of the admission, by the API's parameter."""
