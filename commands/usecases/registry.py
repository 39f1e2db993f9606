"""What there is and what loads when: every use case, every CLI command's module,
and every module loaded only when it is needed.

- `USE_CASES`: each use case's request and answer types and whether it may append,
  the one table the Python API, the server's routes and its OpenAPI document read.
- `COMMAND_MODULES`: the module of `quotaledger.cli` that registers each command; a
  CLI call builds only its own command's module.
- `DEFERRED`: the modules imported inside a function, and when they load; every
  other module of the product loads when its importer does.

Names, not imports: reading these tables loads nothing (a use case's types load
when it is first called, `UseCase.request_type`). tests/package/test_startup.py
holds the product to them.
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


COMMAND_MODULES: dict[str, str] = {
    **dict.fromkeys(
        ("verify", "digest", "repair", "checkpoint", "log", "export", "import"), "journal"
    ),
    **dict.fromkeys(("configure", "inspect"), "capacity"),
    # A runner's per-event commands: their own module, which capacity's help includes.
    **dict.fromkeys(("observe", "admit", "reject", "release"), "runner"),
    **dict.fromkeys(("goals", "audit", "whatif", "report", "metrics"), "operator"),
    "host": "host",
    "budget": "settlement",
    "turn": "settlement",
    "probe": "probe",
    **dict.fromkeys(("demo", "bench"), "tools"),
    "serve": "serve",
}
"""Each top-level CLI command, and the module of `quotaledger.cli` that registers it:
typer turns every registered function into a click command on every start, so a
call builds only its own command's module."""

MODULE_ORDER = (
    "journal",
    "capacity",
    "host",
    "settlement",
    "probe",
    "operator",
    "serve",
    "tools",
)
"""The modules of `quotaledger.cli` that register commands, in the order of the help."""

PER_EVENT_COMMANDS = ("observe", "admit", "reject", "release")
"""What a runner calls once per event or run: they load no module of `DEFERRED`."""

DEFERRED: dict[str, str] = {
    # The engine.
    "quotaledger.journal.pgstore": "a postgresql:// journal",
    "quotaledger.journal.repair": "repair",
    "quotaledger.journal.importing": "import",
    "quotaledger.journal.fanout": "verify, of a file of 32 MiB or more",
    "multiprocessing": "verify's worker processes (journal.fanout)",
    "concurrent.futures": "verify's worker processes (journal.fanout)",
    "hashlib": "hashing past 1 MiB in one process (OpenSSL; journal.sha256)",
    "shlex": "a turn's owed spend command (turn resume, turn status)",
    # The application.
    "quotaledger.api": "the Python API, and the commands with no service of their own",
    "quotaledger.remote": "a journal given as a server's URL (SPEC §11)",
    "ssl": "an https:// server's URL",
    "quotaledger.adapters.usage": "observe --usage",
    "quotaledger.adapters.headers": "--provider-headers",
    "json": "observe --usage; an answer that UTF-8 cannot hold (cli.output)",
    "quotaledger.report.html": "report",
    "quotaledger.services.metrics_http": "metrics --listen",
    "rich": "a progress bar on a terminal (verify, export, import)",
    "quotaledger.tools.demo": "demo",
    "quotaledger.tools.bench_run": "bench",
    "quotaledger.server": "serve, and metrics --listen (services.metrics_http)",
    "psycopg": "bench --compare postgresql (a postgresql:// journal loads it with pgstore)",
    "litellm": "the LiteLLM callback's first instance (adapters.litellm)",
}
"""Every module the product imports inside a function, and when it loads: nothing
else is imported there."""

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
