"""The execution probe's use cases (SPEC §6): `probe run`, and the Python API's
`latest_probe` (no command of its own).

Answers carry the observation as journaled (`projections.probes.ProbeObserved`): the
probe's primary result, whose fields are its keys.
"""

import msgspec

from quotaledger.projections.limits import INTERVAL_MS_DEFAULT
from quotaledger.projections.probes import ProbeObserved
from quotaledger.usecases.decode import Answer, Event, Request
from quotaledger.usecases.fields import (
    CandidatePaths,
    Identifier,
    IntervalMs,
    ProbeCommand,
    ProbeText,
    ProbeTimeout,
    ReferenceBytes,
    SidecarPath,
    Time,
)


class ProbeRunRequest(Request):
    """Run `command` in its own process group and journal what was observed."""

    goal: Identifier
    command: ProbeCommand
    candidates: CandidatePaths = msgspec.field(default_factory=list)
    """Files the run is bound to, hashed before and after (a repeated one counts once)."""
    input_revision: ProbeText | None = None
    reference_bytes: ReferenceBytes | None = None
    """A comparison reference kept beside the estimate, never turned into a verdict."""
    sidecar: SidecarPath | None = None
    """A new file for all samples (JSON); it must not exist."""
    interval_ms: IntervalMs = INTERVAL_MS_DEFAULT
    timeout_s: ProbeTimeout | None = None
    """Stop the whole group after this long (exit 124)."""
    at: Time | None = None


class ProbeRunAnswer(Answer):
    """`exit_code` is the command's (124 on timeout, 128+N when killed by signal N);
    `ok` is true whenever the observation was journaled."""

    ok: bool
    appended: bool
    event: Event
    goal: str
    exit_code: int
    signal: int | None
    candidates_changed: list[str]
    stragglers_terminated: int
    observation: ProbeObserved


class LatestProbeRequest(Request):
    """The goal's most recent probe observation (null if none) and its count."""

    goal: Identifier


class LatestObservation(msgspec.Struct):
    """A probe observation and the event that journaled it."""

    seq: int
    at: str
    hash: str
    observation: ProbeObserved | None


class LatestProbeAnswer(Answer):
    ok: bool
    goal: str
    count: int
    latest: LatestObservation | None
