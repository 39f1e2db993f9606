"""What loads when, declared once: the module of `quotaledger.cli` that registers each
command, and every module imported only when it is needed, with when.

A runner calls the CLI once per event, so each module its command loads is start-up
CPU on that path (SPEC §9). A CLI call builds only its own command's module, and a
module of `DEFERRED` loads only where it is said to; every other module of the
product loads when its importer does. tests/package/test_startup.py holds the product
to these tables. This module is read by every CLI call: tables, and the registry's
rows, which import nothing.
"""

from quotaledger.usecases.registry import PER_EVENT, USE_CASES

COMMAND_MODULES: dict[str, str] = {
    **{
        case.command.split()[0]: case.cli
        for case in USE_CASES.values()
        if case.command is not None and case.cli is not None
    },
    # The commands that are no use case: they run another program of the package.
    **dict.fromkeys(("demo", "bench"), "tools"),
    "serve": "serve",
}
"""Each top-level CLI command, and the module of `quotaledger.cli` that registers it
(its use cases' registry rows): typer turns every registered function into a click
command on every start, so a call builds only its own command's module. A runner's
per-event commands have their own module (`runner`), which capacity's help includes."""

MODULE_ORDER = (
    "journal",
    "capacity",
    "prices",
    "pools",
    "host",
    "settlement",
    "probe",
    "operator",
    "serve",
    "tools",
)
"""The modules of `quotaledger.cli` that register commands, in the order of the help."""

PER_EVENT_COMMANDS = PER_EVENT
"""What a runner calls once per event or run (the registry's per-event rows): they load
no module of `DEFERRED`."""

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
    "quotaledger.lean.remote_call": "a CLI call with a server's URL (lean.dispatch)",
    "ssl": "an https:// server's URL",
    "quotaledger.adapters.usage": "observe --usage",
    "quotaledger.adapters.headers": "--provider-headers",
    "quotaledger.journal.jsoninput": "a JSON --usage or --provider-headers body",
    "quotaledger.cli.parse_errors": "a command line the option parser refuses",
    "json": "observe --usage; an answer that UTF-8 cannot hold (render.output)",
    "quotaledger.report.html": "report",
    # audit, whatif and report load it with their service
    "quotaledger.projections.audit": "verify --decisions",
    "quotaledger.server.metrics_listen": "metrics --listen",
    "rich": "a progress bar on a terminal (verify, export, import)",
    "quotaledger.tools.demo": "demo",
    "quotaledger.tools.bench_run": "bench",
    "quotaledger.tools.bench_pg": "bench --compare postgresql",
    "quotaledger.tools.bench_serve": "bench --serve",
    "quotaledger.tools.bench_serve_clients": "bench --serve's client processes",
    "uvloop": "serve, where it is installed",
    "quotaledger.server": "serve, and metrics --listen (server.metrics_listen)",
    "psycopg": "bench --compare postgresql (a postgresql:// journal loads it with pgstore)",
    "litellm": "the LiteLLM callback's first instance (adapters.litellm)",
}
"""Every module the product imports inside a function, and when it loads: nothing
else is imported there."""

CLIENT_DEFERRED: dict[str, str] = {
    "quotaledger.journal.clock": "a CLI client call given --at or a duration (client.call, "
    "client.command_line)",
}
"""Modules the local CLI loads at start but a CLI client of a server (client.call,
SPEC §9's half of `import typer, msgspec`) imports only when a call needs them."""

LEAN_PATH: dict[str, str] = {
    "quotaledger.lean.local": "a per-event command on a local journal (lean.dispatch)",
}
"""Modules the console script imports inside a function to run a per-event command
without typer (lean.dispatch): such a command loads them, every other command does not."""

LAZY_NAMES: dict[str, str] = {
    "quotaledger.journal.errors": "`quotaledger.Error` and the other error names: every "
    "command loads them itself, once cli/main.py has paused the cycle collector",
}
"""Modules imported inside a function only to resolve a name on first use (the
package's `__getattr__`), not to keep them off a command's path."""
