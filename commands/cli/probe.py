"""Probe commands: `quotaledger probe run ... -- CMD ARGS...` (SPEC §6)."""

import sys
from typing import Annotated

import typer

from quotaledger.cli.common import AtOpt, CommandTable, Ctx, GoalOpt, duration_option
from quotaledger.projections.limits import INTERVAL_MS_DEFAULT, INTERVAL_MS_MAX, INTERVAL_MS_MIN
from quotaledger.render.output import Output, plural
from quotaledger.services.probe import ProbeService
from quotaledger.usecases.decode import CLI, decode
from quotaledger.usecases.probe import ProbeRunAnswer, ProbeRunRequest

STDERR_FD = 2

commands = CommandTable()

# Everything after `--` (or after the first argument that is not an option) belongs
# to CMD, so CMD's own flags (-c, --json, ...) never reach quotaledger's parser.
_TRAILING = {"allow_interspersed_args": False}

CmdArg = Annotated[
    list[str] | None,
    typer.Argument(
        help="The command to probe and its arguments, after `--`.", metavar="-- CMD [ARGS]..."
    ),
]
CandidateOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--candidate", help="A file the run is bound to (repeatable); hashed before and after."
    ),
]
InputRevisionOpt = Annotated[
    str | None, typer.Option("--input-revision", help="The input revision the run used.")
]
ReferenceBytesOpt = Annotated[
    int | None,
    typer.Option(
        "--reference-bytes",
        help="A comparison reference kept beside the estimate (never turned into a verdict).",
    ),
]
SidecarOpt = Annotated[
    str | None,
    typer.Option("--sidecar", help="New file for all samples (JSON); must not exist."),
]
IntervalMsOpt = Annotated[
    int,
    typer.Option(
        "--interval-ms", help=f"Sampling interval, {INTERVAL_MS_MIN}-{INTERVAL_MS_MAX} ms."
    ),
]
TimeoutOpt = Annotated[
    float | None,
    duration_option("--timeout-s", "Stop the whole group after this long (exit 124).", whole=False),
]


def register(app: typer.Typer) -> None:
    """Add this domain's commands to the quotaledger app."""
    probe = typer.Typer(
        help="Run a command in its own process group and journal a memory estimate.",
        no_args_is_help=True,
        rich_markup_mode=None,
    )
    app.add_typer(probe, name="probe")
    commands.add_to(probe)


@commands(
    "run",
    example="quotaledger probe run --goal g --candidate solver.py --input-revision r42 "
    "--reference-bytes 1073741824 --sidecar samples.json -- python solver.py",
    context_settings=_TRAILING,
)
def run(
    ctx: Ctx,
    goal: GoalOpt,
    cmd: CmdArg = None,
    candidate: CandidateOpt = None,
    input_revision: InputRevisionOpt = None,
    reference_bytes: ReferenceBytesOpt = None,
    sidecar: SidecarOpt = None,
    interval_ms: IntervalMsOpt = INTERVAL_MS_DEFAULT,
    timeout_s: TimeoutOpt = None,
    at: AtOpt = None,
) -> Output:
    """Run CMD in a new process group, sample its PSS, journal one probe.observed.

    The exit code is CMD's (124 on --timeout-s, 128+N if a signal N killed it). The
    memory figure is a sequential sum of per-process PSS reads: an estimate, never a
    verdict. With --json, CMD's stdout goes to stderr so stdout holds one JSON object.
    """
    values = {
        "goal": goal,
        "command": cmd or [],
        "candidates": candidate or [],
        "input_revision": input_revision,
        "reference_bytes": reference_bytes,
        "sidecar": sidecar,
        "interval_ms": interval_ms,
        "timeout_s": timeout_s,
        "at": at,
    }
    with ctx.service(ProbeService, write=True) as ledger:
        # Once the journal is open: an unreadable one is exit 3 ahead of a bad option.
        request = decode(ProbeRunRequest, values, CLI)
        answer = ledger.probe_run(request, stdout_fd=STDERR_FD if ctx.as_json else None)
    if not ctx.as_json:
        # Humans: CMD's stdout stays CMD's alone; the summary goes to stderr.
        sys.stderr.write(_summary(answer))
        sys.stderr.flush()
    return Output(answer, text="", exit_code=answer.exit_code)


def _summary(answer: ProbeRunAnswer) -> str:
    """One line (two with a sidecar), on stderr: stdout stays CMD's own."""
    obs = answer.observation
    memory = obs.memory
    if memory is None:
        mem = "memory not sampled (no /proc/<pid>/smaps_rollup here)"
    else:
        peak = memory.peak_estimate_bytes
        shown = "-" if peak is None else f"{peak / (1 << 20):.1f} MiB"
        mem = (
            f"memory: peak estimate {shown} (sequential PSS sum, not atomic; "
            f"{plural(memory.samples, 'sample')}, {memory.unavailable_samples} incomplete)"
        )
    timed_out = " (timed out)" if obs.timed_out else ""
    lines = [
        f"probe: exit {obs.exit_code}{timed_out} after {obs.duration_s:.3f}s; {mem}; "
        f"attribution {obs.attribution}; seq {answer.event.seq}"
    ]
    sidecar = obs.sidecar
    if sidecar is not None and sidecar.sha256 is not None:
        lines.append(f"sidecar {sidecar.path}: {sidecar.bytes:,} bytes, sha256 {sidecar.sha256}")
    elif sidecar is not None:
        lines.append(f"sidecar unavailable: {sidecar.error or '-'}")
    return "".join(f"quotaledger {line}\n" for line in lines)
