"""Execution probe use cases (SPEC §6): run a command, journal one `probe.observed`.

Order matters and is the point of this module:
1. the request type checked the input (a bad one is exit 2 and the command never
   runs); check what needs the journal or the filesystem, and hash the candidates;
2. create the sidecar exclusively (an existing path is refused before the command
   starts, so the command's side effects never happen);
3. run the command WITHOUT the journal lock (a probe may run for hours);
4. hash the candidates again, write the sidecar (its failures are recorded, never
   raised);
5. append the observation in a transaction: its time is sampled under the lock, now.
"""

from __future__ import annotations

import json
import os
import resource

import msgspec

from quotaledger.journal import Error, InvalidInput, StorageFailure, codes
from quotaledger.journal.filestore import FileStore
from quotaledger.projections import probes
from quotaledger.services import probe_io
from quotaledger.services.base import ServiceBase
from quotaledger.services.pools import require_not_pool
from quotaledger.usecases.decode import Event, event_of
from quotaledger.usecases.probe import (
    LatestObservation,
    LatestProbeAnswer,
    LatestProbeRequest,
    ProbeRunAnswer,
    ProbeRunRequest,
)


class ProbeService(ServiceBase):
    def probe_run(
        self, request: ProbeRunRequest, *, stdout_fd: int | None = None
    ) -> ProbeRunAnswer:
        """Run `command` in its own process group and journal what was observed.

        `stdout_fd`: where the command's stdout goes (None: inherited); the CLI's
        `--json` sends it to stderr. The answer's `exit_code` is the command's (124 on
        timeout, 128+N when killed by signal N); `ok` is true whenever the observation
        was journaled.
        """
        goal, argv, sidecar = request.goal, request.command, request.sidecar
        paths = list(dict.fromkeys(request.candidates))  # repeated --candidate counts once
        if request.at is not None:  # refuse a backwards --at now, not after the command ran
            self._time_without_lock(goal, request.at)
        if self.journal.folded:  # a pool's name is no goal's (SPEC §12.1), before it runs
            require_not_pool(self.journal.state, goal)
        if probe_io.resolve_command(argv) is None:
            raise InvalidInput(
                f"command {argv[0]!r} not found or not executable",
                code=codes.COMMAND_NOT_FOUND,
                command=argv[0],
            )
        self._check_journal_can_grow(goal, argv, paths, request.input_revision, sidecar)
        before = {path: _hash_candidate(path) for path in paths}
        sidecar_file = _create_sidecar(sidecar) if sidecar is not None else None
        run = _run_command(request, sidecar_file, stdout_fd)
        changed = [path for path in paths if probe_io.hash_after(path) != before[path]]
        written = None
        if sidecar_file is not None:
            header = {"goal": goal, "command": argv, "interval_ms": request.interval_ms}
            written = sidecar_file.write(probe_io.sidecar_document(header, run))
        observation = probes.ProbeObserved(
            command=argv,
            candidates=before,
            input_revision=request.input_revision,
            exit_code=run.exit_code,
            timed_out=run.timed_out,
            duration_s=round(run.duration_s, 6),
            memory=run.sampler.summary() if run.sampler is not None else None,
            reference_bytes=request.reference_bytes,
            attribution="candidate_changed" if changed else "bound",
            sidecar=written,
        )
        return ProbeRunAnswer(
            ok=True,
            appended=True,
            event=self._append_observation(goal, request.at, observation),
            goal=goal,
            exit_code=run.exit_code,
            signal=run.signal,
            candidates_changed=changed,
            stragglers_terminated=run.stragglers_terminated,
            observation=observation,
        )

    def _append_observation(
        self, goal: str, at: str | None, observation: probes.ProbeObserved
    ) -> Event:
        """One transaction, taken only now: the event time is sampled under the lock.
        The append checks the payload against its schema (inputs were checked before)."""
        try:
            with self.journal.transaction() as txn:
                require_not_pool(txn.state, goal)  # one space of names (SPEC §12.1)
                pending = txn.append(probes.OBSERVED, goal, observation, txn.time_for(goal, at))
        except Error as error:
            # The command already ran: hand its result back with the error so the
            # caller does not have to run it again to learn it.
            error.context.setdefault("observation", msgspec.to_builtins(observation))
            error.context.setdefault("exit_code", observation.exit_code)
            error.context.setdefault("command_ran", True)
            raise
        return event_of(pending)

    def _check_journal_can_grow(
        self,
        goal: str,
        argv: list[str],
        paths: list[str],
        input_revision: str | None,
        sidecar: str | None,
    ) -> None:
        """Refuse before CMD runs when the file-size limit (`ulimit -f`, RLIMIT_FSIZE)
        certainly leaves no room for the observation in the journal file.

        The observation is the probe's primary result: if it cannot be appended, the
        command would run (maybe for hours) only to end in exit 4. The check uses the
        smallest line this observation can become, so it never refuses a probe that
        could have been journaled; a run that passes it may still fail to append (a
        longer line than the bound, or another writer grew the journal meanwhile),
        which is then exit 4 with the observation, the command's exit code and
        `command_ran: true` in the error.
        """
        if not isinstance(self.journal.store, FileStore):
            return
        limit, _hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        if limit == resource.RLIM_INFINITY:
            return
        try:
            size = os.stat(self.journal.store.path).st_size
        except OSError:
            return  # the append reports it
        needed = _smallest_line_bytes(goal, argv, paths, input_revision, sidecar)
        if size + needed > limit:
            raise StorageFailure(
                f"the journal {self.journal.store.path} ({size} bytes) cannot take the "
                f"observation (at least {needed} bytes) under this process's file-size limit "
                f"(ulimit -f: {limit} bytes); the command was not run",
                code=codes.FILE_SIZE_LIMIT,
                journal_bytes=size,
                limit_bytes=limit,
                needed_bytes=needed,
                command_ran=False,
            )

    def latest_probe(self, request: LatestProbeRequest) -> LatestProbeAnswer:
        """The goal's most recent probe observation (null if none) and its count."""
        state = self.journal.state.probes
        latest = state.latest.get(request.goal)
        return LatestProbeAnswer(
            ok=True,
            goal=request.goal,
            count=state.count.get(request.goal, 0),
            latest=None
            if latest is None
            else LatestObservation(latest.seq, latest.at, latest.hash, latest.observation),
        )


def _smallest_line_bytes(
    goal: str, argv: list[str], paths: list[str], input_revision: str | None, sidecar: str | None
) -> int:
    """A lower bound of the journal line this probe's observation becomes: the values
    still unknown (exit code, duration, memory, sidecar outcome) at their shortest."""
    data = {
        "command": argv,
        "candidates": {path: "0" * 64 for path in paths},
        "input_revision": input_revision,
        "exit_code": 0,
        "timed_out": False,
        "duration_s": 0.0,
        "memory": None,
        "reference_bytes": None,
        "attribution": "bound",
        "sidecar": None if sidecar is None else {"status": "unavailable", "error": ""},
    }
    envelope = {"v": 1, "seq": 0, "at": "2026-11-29T14:00:00.000000Z",
                "kind": probes.OBSERVED, "goal": goal, "data": data,
                "prev": "0" * 64, "hash": "0" * 64}  # fmt: skip
    return len(json.dumps(envelope, separators=(",", ":"), ensure_ascii=False).encode()) + 1


def _hash_candidate(path: str) -> str:
    try:
        return probe_io.hash_file(path)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise InvalidInput(
            lambda name: f"{name} {path!r} cannot be read: {reason}",
            code=codes.CANDIDATE_UNREADABLE,
            about="candidates",
            path=path,
        ) from exc


def _run_command(
    request: ProbeRunRequest, sidecar_file: probe_io.SidecarFile | None, stdout_fd: int | None
) -> probe_io.RunResult:
    """The command run to its end; the sidecar is discarded if it never ran to one."""
    try:
        return probe_io.run_group(
            request.command,
            interval_s=request.interval_ms / 1000,
            timeout_s=request.timeout_s,
            stdout_fd=stdout_fd,
        )
    except OSError as exc:
        if sidecar_file is not None:
            sidecar_file.discard()
        raise InvalidInput(
            f"command could not be started: {exc}", code=codes.COMMAND_NOT_STARTED
        ) from exc
    except BaseException:
        if sidecar_file is not None:
            sidecar_file.discard()
        raise


def _create_sidecar(path: str) -> probe_io.SidecarFile:
    try:
        return probe_io.SidecarFile.create(path)
    except probe_io.SidecarExists as exc:
        raise InvalidInput(
            lambda name: (
                f"{name} {path!r} already exists (a symlink counts); "
                "the probe never overwrites a file: choose a new path"
            ),
            code=codes.SIDECAR_EXISTS,
            about="sidecar",
            path=path,
        ) from exc


__all__ = ["ProbeService"]
