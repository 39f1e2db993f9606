"""Every use case: its request and answer types, its CLI command, and whether it may
append.

The one table the Python API, the server's routes and its OpenAPI document read.
Types are named, not imported, so that reading the table loads nothing: a use case's
module is imported when it is first called (`UseCase.request_type`). What loads when
(the CLI's command table, the deferred modules): `quotaledger.startup`.
"""

import importlib
from typing import Any, NamedTuple


class UseCase(NamedTuple):
    name: str
    """The Python API's method name (the command words joined by `_`)."""
    module: str
    """`quotaledger.usecases.MODULE` defines the request and answer types."""
    writes: bool
    """It may append (a `POST` on the server); else it only reads (a `GET`)."""

    @property
    def command(self) -> str | None:
        """The CLI command's words (`host phase`, `import`), or None for a method of
        the Python API alone."""
        if self.name in API_ONLY:
            return None
        return " ".join(self.name.removesuffix("_").split("_"))

    @property
    def stem(self) -> str:
        return "".join(word.capitalize() for word in self.name.split("_"))

    def request_type(self) -> Any:
        return _type_of(self, "Request")

    def answer_type(self) -> Any:
        return _type_of(self, "Answer")


_TYPES: dict[tuple[str, str], Any] = {}


def _type_of(case: UseCase, suffix: str) -> Any:
    """A use case's request or answer type, its module imported on first use."""
    key = (case.name, suffix)
    found = _TYPES.get(key)
    if found is None:
        module = importlib.import_module(f"quotaledger.usecases.{case.module}")
        found = _TYPES[key] = getattr(module, case.stem + suffix)
    return found


def _cases(module: str, writes: bool, *names: str) -> dict[str, UseCase]:
    return {name: UseCase(name, module, writes) for name in names}


USE_CASES: dict[str, UseCase] = {
    **_cases("capacity_state", True, "configure"),
    **_cases("capacity", True, "observe", "admit", "reject", "release"),
    **_cases("capacity_state", False, "inspect"),
    **_cases(
        "host",
        True,
        "host_phase",
        "host_start",
        "host_exit",
        "host_return",
        "host_continue",
        "host_stop",
        "host_replan",
    ),
    **_cases("host", False, "host_heartbeat", "host_status"),
    **_cases("settlement", True, "budget_configure", "turn_open", "turn_writeback", "turn_spend"),
    **_cases("settlement", False, "turn_resume", "turn_status"),
    **_cases("operator", False, "goals", "audit", "whatif", "report", "metrics"),
    **_cases("journal", False, "verify", "digest", "log", "export"),
    **_cases("journal", True, "repair", "checkpoint", "import_"),
    **_cases("probe", True, "probe_run"),
    **_cases("probe", False, "latest_probe"),
}
"""Every use case, by API method name (SPEC §8), in SPEC's order of domains."""

API_ONLY = frozenset({"latest_probe"})
"""Use cases of the Python API (and the server) with no CLI command."""

NOT_SERVED = frozenset(
    {"verify", "repair", "checkpoint", "export", "import_", "report", "probe_run"}
)
"""Use cases `quotaledger serve` has no /v1 route for (SPEC §11): they need the
journal's own file or run a process on the server (`probe_run`); the report is a page
of its own (`GET /report`)."""
SERVED: dict[str, UseCase] = {
    name: case for name, case in USE_CASES.items() if name not in NOT_SERVED
}
"""The server's /v1 routes: `POST` for a writer, `GET` for a reader."""
