"""Every use case, one row each: what it is, and where each face finds its parts.

A row names its request and answer types (`quotaledger.usecases.MODULE`: STEM +
`Request`/`Answer`), its service (`quotaledger.services.MODULE`: the method NAME of
its `...Service`), its CLI command's module and its renderer (`quotaledger.cli.*`,
`quotaledger.render.*`), and the facts the faces act on: whether it writes, is served,
is per-event, streams, reads the whole journal. Every table a face keys by use case
is derived from these rows (below, `startup`, `render.answers`, `server.routes`,
`remote`); a new use case is a row, its types, its service and its renderer.

Parts are named, not imported: reading the table loads nothing but this module (every
CLI call reads it, the lean ones included), and a name resolves on first use, once
(`resolve`).
"""

import importlib
from typing import Any


class UseCase:
    """One use case's row (a plain class: a NamedTuple's would cost each CLI call
    a tenth of a millisecond to build)."""

    __slots__ = (
        "_request_type",
        "cli",
        "module",
        "name",
        "output",
        "per_event",
        "served",
        "streams",
        "text",
        "whole_journal",
        "writes",
    )

    name: str
    """The Python API's method name (the command words joined by `_`) and the service's."""
    module: str
    """Its domain: `quotaledger.usecases.MODULE` has its types, `quotaledger.services.MODULE`
    its service."""
    writes: bool
    """It may append (a `POST` on the server); else it only reads (a `GET`)."""
    cli: str | None
    """The module of `quotaledger.cli` that registers its command; None: a method of the
    Python API (and the server) alone."""
    text: str | None
    """`render_module.function` of `quotaledger.render`: the printed text of an answer,
    `text(answer) -> str`."""
    output: str | None
    """Or, where the text needs the request or the options that change only the text,
    or the exit code is not the answer's: `output(request, answer, shown) -> Output`."""
    served: bool
    """`quotaledger serve` has a /v1 route for it (SPEC §11)."""
    per_event: bool
    """A runner calls it once per event: its command runs without typer (lean.local)
    and loads no module of `startup.DEFERRED`."""
    streams: bool
    """Its answer is a stream of answers (JSON Lines), printed piece by piece."""
    whole_journal: bool
    """A reader whose work is a pass over the journal: the server runs it on a reader
    handle of its own beside the commits, not in the committer between them."""

    def __init__(
        self,
        name: str,
        module: str,
        writes: bool,
        cli: str | None,
        *,
        text: str | None = None,
        output: str | None = None,
        served: bool = True,
        per_event: bool = False,
        streams: bool = False,
        whole_journal: bool = False,
    ) -> None:
        self.name = name
        self.module = module
        self.writes = writes
        self.cli = cli
        self.text = text
        self.output = output
        self.served = served
        self.per_event = per_event
        self.streams = streams
        self.whole_journal = whole_journal
        self._request_type: Any = None
        """The request type once resolved: a server or a remote ledger decodes one per
        call, and the type's name is built from the row's words."""

    def __repr__(self) -> str:
        return f"UseCase({self.name!r})"

    @property
    def command(self) -> str | None:
        """The CLI command's words (`host phase`, `import`), or None for a method of
        the Python API alone."""
        if self.cli is None:
            return None
        return " ".join(self.name.removesuffix("_").split("_"))

    @property
    def stem(self) -> str:
        return "".join(word.capitalize() for word in self.name.split("_"))

    def request_type(self) -> Any:
        found = self._request_type
        if found is None:  # resolved on first use: the table imports no use case's module
            found = self._request_type = resolve(f"usecases.{self.module}.{self.stem}Request")
        return found

    def answer_type(self) -> Any:
        return resolve(f"usecases.{self.module}.{self.stem}Answer")

    def service_type(self) -> Any:
        """The service class whose method `name` answers it."""
        service = "".join(word.capitalize() for word in self.module.split("_")) + "Service"
        return resolve(f"services.{self.module}.{service}")


_RESOLVED: dict[str, Any] = {}


def resolve(path: str) -> Any:
    """`MODULE.NAME` under `quotaledger` (`usecases.capacity.AdmitRequest`), its module
    imported on first use: the one place a row's names become objects."""
    found = _RESOLVED.get(path)
    if found is None:
        module, _, name = path.rpartition(".")
        found = _RESOLVED[path] = getattr(importlib.import_module(f"quotaledger.{module}"), name)
    return found


_ROWS = (
    UseCase("configure", "capacity_state", True, "capacity", text="capacity.configure_text"),
    UseCase("observe", "capacity", True, "runner", text="per_event.observe_text", per_event=True),
    UseCase("admit", "capacity", True, "runner", output="per_event.admit_output", per_event=True),
    UseCase("reject", "capacity", True, "runner", text="per_event.reject_text", per_event=True),
    UseCase(
        "release", "capacity", True, "runner", output="per_event.release_output", per_event=True
    ),
    UseCase("inspect", "capacity_state", False, "capacity", text="capacity.inspect_text"),
    UseCase("price_set", "prices", True, "prices", text="prices.price_set_text"),
    UseCase("prices", "prices", False, "prices", text="prices.prices_text"),
    UseCase("pool_configure", "pools", True, "pools", text="pools.pool_configure_text"),
    UseCase("pools", "pools", False, "pools", text="pools.pools_text"),
    UseCase("host_phase", "host", True, "host", text="host.phase_text"),
    UseCase("host_start", "host", True, "host", text="host.start_text"),
    UseCase("host_exit", "host", True, "host", text="host.exit_text"),
    UseCase("host_return", "host", True, "host", output="host.return_output"),
    UseCase("host_continue", "host", True, "host", text="host.continue_text"),
    UseCase("host_stop", "host", True, "host", text="host.stop_text"),
    UseCase("host_replan", "host", True, "host", text="host.replan_text"),
    UseCase("host_heartbeat", "host", False, "host", text="host.heartbeat_text"),
    UseCase("host_status", "host", False, "host", output="host.status_output"),
    UseCase("budget_configure", "settlement", True, "settlement", text="settlement.budget_text"),
    UseCase("turn_open", "settlement", True, "settlement", text="settlement.open_text"),
    UseCase("turn_writeback", "settlement", True, "settlement", text="settlement.writeback_text"),
    UseCase("turn_spend", "settlement", True, "settlement", text="settlement.spend_text"),
    UseCase("turn_resume", "settlement", False, "settlement", text="settlement.resume_text"),
    UseCase("turn_status", "settlement", False, "settlement", text="settlement.status_text"),
    UseCase("goals", "operator", False, "operator", text="operator.goals_text"),
    UseCase(
        "audit", "operator", False, "operator", output="operator.audit_output", whole_journal=True
    ),
    UseCase(
        "whatif", "operator", False, "operator", output="operator.whatif_output", whole_journal=True
    ),
    UseCase("report", "operator", False, "operator", served=False),
    UseCase("metrics", "operator", False, "operator", output="operator.metrics_output"),
    UseCase(
        "validity", "operator", False, "operator", text="operator.validity_text", whole_journal=True
    ),
    UseCase("verify", "journal", False, "journal", served=False),
    UseCase("digest", "journal", False, "journal", text="journal.digest_text", whole_journal=True),
    UseCase("log", "journal", False, "journal", streams=True, whole_journal=True),
    UseCase("export", "journal", False, "journal", served=False),
    UseCase("repair", "journal", True, "journal", served=False),
    UseCase("checkpoint", "journal", True, "journal", served=False),
    UseCase("import_", "journal", True, "journal", served=False),
    UseCase("probe_run", "probe", True, "probe", served=False),
    UseCase("latest_probe", "probe", False, None),
)
"""The rows, in SPEC §8's order of domains. `report`, `verify`, `export`, `repair`,
`checkpoint`, `import` and `probe run` are not served: they need the journal's own file
or run a process on the server; the report is a page of its own (`GET /report`)."""

USE_CASES: dict[str, UseCase] = {case.name: case for case in _ROWS}
"""Every use case, by API method name (SPEC §8)."""
SERVED: dict[str, UseCase] = {name: case for name, case in USE_CASES.items() if case.served}
"""The server's /v1 routes: `POST` for a writer, `GET` for a reader."""
PER_EVENT: tuple[str, ...] = tuple(name for name, case in USE_CASES.items() if case.per_event)
"""What a runner calls once per event or run."""
