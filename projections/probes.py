"""Execution probes (SPEC §6, seed 003): one `probe.observed` event per probed command.

The memory figure is a *sequential* sum of per-process PSS reads, so a stable
process group that hands memory from one process to another between two reads can
be counted twice. The payload therefore labels it `sequential_pss_sum`, `atomic:
false`, and carries no verdict: nothing here compares it with `reference_bytes`.

State: the latest observation per goal (`latest[goal]`) and how many each goal has.
"""

from typing import Annotated, Any, Literal

import msgspec

from quotaledger.journal import Record
from quotaledger.projections.limits import (
    BYTES_MAX,
    CANDIDATES_MAX,
    COMMAND_ARGS_MAX,
    EXIT_CODE_MAX,
    PATH_CHARS_MAX,
)
from quotaledger.projections.types import FreeText, Payload, Sha256Hex, StateStruct

VERSION = "1"

OBSERVED = "probe.observed"


ByteCount = Annotated[int, msgspec.Meta(ge=0, le=BYTES_MAX)]
Count = Annotated[int, msgspec.Meta(ge=0, le=BYTES_MAX)]
ExitCode = Annotated[int, msgspec.Meta(ge=0, le=EXIT_CODE_MAX)]
Seconds = Annotated[float, msgspec.Meta(ge=0)]
PathText = Annotated[str, msgspec.Meta(min_length=1, max_length=PATH_CHARS_MAX)]


class ProbeMemory(Payload, frozen=True, kw_only=True):
    """What the sampler saw: an estimate, never a verdict."""

    method: Literal["sequential_pss_sum"] = "sequential_pss_sum"
    atomic: Literal[False] = False
    peak_estimate_bytes: ByteCount | None
    """Max over sampling rounds of the round's PSS sum; null when no round read any."""
    samples: Count
    """Sampling rounds taken."""
    unavailable_samples: Count
    """Rounds in which at least one member's PSS could not be read."""


class Sidecar(Payload, frozen=True, kw_only=True, omit_defaults=True):
    """Either the digest of a completely written and closed file, or why there is none.

    JSON has no untagged unions of objects, so both shapes share one Struct and
    `__post_init__` admits exactly one of them: `{"path", "sha256", "bytes"}` or
    `{"status": "unavailable", "error"}`.
    """

    path: PathText | None = None
    sha256: Sha256Hex | None = None
    bytes: ByteCount | None = None
    status: Literal["unavailable"] | None = None
    error: FreeText | None = None

    def __post_init__(self) -> None:
        super().__post_init__()  # the shared value rules (identifiers, times, texts)
        digest = (self.path, self.sha256, self.bytes)
        unavailable = (self.status, self.error)
        if all(v is not None for v in digest) and all(v is None for v in unavailable):
            return
        if all(v is not None for v in unavailable) and all(v is None for v in digest):
            return
        raise ValueError(
            'sidecar must be {"path","sha256","bytes"} or {"status":"unavailable","error"}'
        )


class ProbeObserved(Payload, frozen=True, kw_only=True):
    command: Annotated[list[FreeText], msgspec.Meta(min_length=1, max_length=COMMAND_ARGS_MAX)]
    candidates: Annotated[dict[PathText, Sha256Hex], msgspec.Meta(max_length=CANDIDATES_MAX)]
    """Each candidate file's SHA-256 before the command ran."""
    input_revision: FreeText | None
    exit_code: ExitCode
    timed_out: bool
    duration_s: Seconds
    memory: ProbeMemory | None
    """Null where the platform offers no /proc/<pid>/smaps_rollup."""
    reference_bytes: ByteCount | None
    """The caller's comparison reference, kept beside the estimate, never compared."""
    attribution: Literal["bound", "candidate_changed"]
    sidecar: Sidecar | None


EVENTS: dict[str, type[Payload]] = {OBSERVED: ProbeObserved}
"""Event kind -> payload Struct."""


class LatestProbe(StateStruct):
    seq: int = 0
    at: str = ""
    hash: str = ""
    observation: ProbeObserved | None = None


class ProbesState(StateStruct):
    latest: dict[str, LatestProbe] = msgspec.field(default_factory=dict)
    """Goal -> its most recent probe observation."""
    count: dict[str, int] = msgspec.field(default_factory=dict)
    """Goal -> how many probe observations it has."""


def apply(state: ProbesState, record: Record, payload: Any) -> None:
    """Fold one event of this domain into the state."""
    if record.kind != OBSERVED or record.goal is None:
        return
    state.latest[record.goal] = LatestProbe(
        seq=record.seq, at=record.at, hash=record.hash, observation=payload
    )
    state.count[record.goal] = state.count.get(record.goal, 0) + 1
