"""The Python API a runner holds in-process; the CLI is a thin layer over it.

    from quotaledger import Ledger

    with Ledger.open("quotaledger.jsonl") as ledger:
        decision = ledger.admit(goal="g", run="r1", arm="baseline", forecast_tpm=2000)

Every method returns the same JSON-ready dict the CLI prints with `--json`;
expected failures raise `quotaledger.Error` subclasses. Every method takes keyword
arguments only: a use case's method is `endpoint(ItsRequest, Service.method)`, whose
keywords are the request's fields (mypy reads them from the Struct) and which
decodes them as the CLI does (`usecases.decode`), so a value of the wrong type or
range raises `InvalidInput` naming the parameter. A closed ledger refuses every
call; calls from several threads on one ledger take turns.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

import msgspec

from quotaledger.journal import InvalidInput, codes
from quotaledger.journal.errors import LedgerClosed
from quotaledger.journal.limits import CHECKPOINT_EVERY_EVENTS, LOCK_TIMEOUT_S_DEFAULT
from quotaledger.journal.target import check_target, is_remote_target
from quotaledger.services.base import ServiceBase
from quotaledger.services.capacity import CapacityService
from quotaledger.services.capacity_state import CapacityStateService
from quotaledger.services.host import HostService
from quotaledger.services.journal import JournalService
from quotaledger.services.operator import OperatorService
from quotaledger.services.pools import PoolsService
from quotaledger.services.prices import PricesService
from quotaledger.services.probe import ProbeService
from quotaledger.services.settlement import SettlementService
from quotaledger.usecases.capacity import (
    AdmitRequest,
    ObserveRequest,
    RejectRequest,
    ReleaseRequest,
)
from quotaledger.usecases.capacity_state import ConfigureRequest, InspectRequest
from quotaledger.usecases.decode import API, Answer, Request, builtins, decode, documented
from quotaledger.usecases.host import (
    HostContinueRequest,
    HostExitRequest,
    HostHeartbeatRequest,
    HostPhaseRequest,
    HostReplanRequest,
    HostReturnRequest,
    HostStartRequest,
    HostStatusRequest,
    HostStopRequest,
)
from quotaledger.usecases.journal import (
    CheckpointRequest,
    DigestRequest,
    ExportRequest,
    ImportRequest,
    LogRequest,
    RepairRequest,
    VerifyRequest,
)
from quotaledger.usecases.operator import (
    AuditRequest,
    GoalsRequest,
    MetricsRequest,
    ReportRequest,
    ValidityRequest,
    WhatifRequest,
)
from quotaledger.usecases.pools import PoolConfigureRequest, PoolsRequest
from quotaledger.usecases.prices import PriceSetRequest, PricesRequest
from quotaledger.usecases.probe import LatestProbeRequest, ProbeRunRequest
from quotaledger.usecases.settlement import (
    BudgetConfigureRequest,
    TurnOpenRequest,
    TurnResumeRequest,
    TurnSpendRequest,
    TurnStatusRequest,
    TurnWritebackRequest,
)

P = ParamSpec("P")
Q = TypeVar("Q", bound=Request)
S = TypeVar("S", bound=ServiceBase)


def endpoint(
    request_type: Callable[P, Q], method: Callable[[S, Q], Answer]
) -> Callable[Concatenate[Ledger, P], dict[str, Any]]:
    """A `Ledger` method for one use case: keyword arguments decoded into
    `request_type`, answered by `method` of its service on this ledger's journal."""
    service_type: type[ServiceBase] = _owner(method)
    decoded: type[Request] = request_type  # type: ignore[assignment]

    def call(self: Ledger, /, *args: P.args, **kwargs: P.kwargs) -> dict[str, Any]:
        if self.closed:
            raise LedgerClosed(f"the ledger is closed; {method.__name__}() needs an open one")
        if args:
            raise InvalidInput(
                f"{method.__name__}() takes keyword arguments only (got {len(args)} positional)",
                code=codes.INVALID_ARGUMENT,
            )
        request = decode(decoded, kwargs, API)
        with self._turn:
            answer = method(self._service(service_type), request)  # type: ignore[arg-type]
        return builtins(answer)

    call.__name__ = call.__qualname__ = method.__name__
    call.__doc__ = documented(decoded)  # the request's words, as --help and /openapi.json
    call.use_case = (service_type, method)  # type: ignore[attr-defined]  # Ledger.answer
    call.request_type = decoded  # type: ignore[attr-defined]  # the registry's row's
    return call


def _owner(method: Callable[..., Any]) -> type[ServiceBase]:
    owner_name = method.__qualname__.split(".")[0]
    owner: type[ServiceBase] = getattr(sys.modules[method.__module__], owner_name)
    assert issubclass(owner, ServiceBase)
    return owner


class Ledger(ServiceBase):
    """One open journal and every use case over it."""

    closed = False
    _turn: threading.RLock
    _services: dict[type[ServiceBase], ServiceBase]

    def __init__(self, journal: Any) -> None:
        super().__init__(journal)
        self._turn = threading.RLock()
        self._services = {}

    def _service(self, service_type: type[S]) -> S:
        """This ledger's `service_type`, on its journal (made on first use)."""
        service = self._services.get(service_type)
        if service is None:
            service = self._services[service_type] = service_type(self.journal)
        return service  # type: ignore[return-value]

    def answer(self, name: str, request: Request) -> Answer:
        """The typed answer of use case `name` (its API method's name) to a request
        already decoded: what a server does with a request it decoded itself."""
        if self.closed:
            raise LedgerClosed(f"the ledger is closed; {name}() needs an open one")
        service_type, method = getattr(type(self), name).use_case
        with self._turn:
            answer: Answer = method(self._service(service_type), request)
        return answer

    verify = endpoint(VerifyRequest, JournalService.verify)
    digest = endpoint(DigestRequest, JournalService.digest)
    repair = endpoint(RepairRequest, JournalService.repair)
    checkpoint = endpoint(CheckpointRequest, JournalService.checkpoint)
    export = endpoint(ExportRequest, JournalService.export)
    import_ = endpoint(ImportRequest, JournalService.import_)

    def log(
        self, /, *args: Any, wait: Callable[[], None] | None = None, **filters: Any
    ) -> Iterator[dict[str, Any]]:
        """Events in journal order, filtered (`LogRequest`'s fields), as `log --json`
        prints them; `wait` is what `follow` calls between looks (a short sleep)."""
        if self.closed:
            raise LedgerClosed("the ledger is closed; log() needs an open one")
        if args:
            raise InvalidInput(
                f"log() takes keyword arguments only (got {len(args)} positional)",
                code=codes.INVALID_ARGUMENT,
            )
        request = decode(LogRequest, filters, API)
        with self._turn:
            events = self._service(JournalService).log(request, wait)
        return (msgspec.to_builtins(event) for event in events)

    configure = endpoint(ConfigureRequest, CapacityStateService.configure)
    observe = endpoint(ObserveRequest, CapacityService.observe)
    admit = endpoint(AdmitRequest, CapacityService.admit)
    reject = endpoint(RejectRequest, CapacityService.reject)
    release = endpoint(ReleaseRequest, CapacityService.release)
    inspect = endpoint(InspectRequest, CapacityStateService.inspect)
    price_set = endpoint(PriceSetRequest, PricesService.price_set)
    prices = endpoint(PricesRequest, PricesService.prices)
    pool_configure = endpoint(PoolConfigureRequest, PoolsService.pool_configure)
    pools = endpoint(PoolsRequest, PoolsService.pools)
    host_phase = endpoint(HostPhaseRequest, HostService.host_phase)
    host_start = endpoint(HostStartRequest, HostService.host_start)
    host_exit = endpoint(HostExitRequest, HostService.host_exit)
    host_return = endpoint(HostReturnRequest, HostService.host_return)
    host_continue = endpoint(HostContinueRequest, HostService.host_continue)
    host_stop = endpoint(HostStopRequest, HostService.host_stop)
    host_replan = endpoint(HostReplanRequest, HostService.host_replan)
    host_heartbeat = endpoint(HostHeartbeatRequest, HostService.host_heartbeat)
    host_status = endpoint(HostStatusRequest, HostService.host_status)
    budget_configure = endpoint(BudgetConfigureRequest, SettlementService.budget_configure)
    turn_open = endpoint(TurnOpenRequest, SettlementService.turn_open)
    turn_writeback = endpoint(TurnWritebackRequest, SettlementService.turn_writeback)
    turn_spend = endpoint(TurnSpendRequest, SettlementService.turn_spend)
    turn_resume = endpoint(TurnResumeRequest, SettlementService.turn_resume)
    turn_status = endpoint(TurnStatusRequest, SettlementService.turn_status)
    probe_run = endpoint(ProbeRunRequest, ProbeService.probe_run)
    latest_probe = endpoint(LatestProbeRequest, ProbeService.latest_probe)
    audit = endpoint(AuditRequest, OperatorService.audit)
    goals = endpoint(GoalsRequest, OperatorService.goals)
    whatif = endpoint(WhatifRequest, OperatorService.whatif)
    report = endpoint(ReportRequest, OperatorService.report)
    metrics = endpoint(MetricsRequest, OperatorService.metrics)
    validity = endpoint(ValidityRequest, OperatorService.validity)

    @classmethod
    def open(
        cls,
        target: str,
        *,
        write: bool = True,
        lock_timeout_s: float = LOCK_TIMEOUT_S_DEFAULT,
        checkpoint_every: int = CHECKPOINT_EVERY_EVENTS,
        allow_corrupt: bool = False,
    ) -> Ledger:
        """Open the journal at `target` (a file path or a postgresql:// URL), or be a
        client of the server at `target` (`http://HOST:PORT`, `https://...`, `unix:PATH`):
        the same methods, answers and exceptions (`quotaledger.remote`)."""
        if isinstance(target, os.PathLike):
            target = os.fspath(target)
        if isinstance(target, str) and is_remote_target(target):
            from quotaledger.remote import RemoteLedger

            check_target(target)
            # Not a Ledger, but one to its callers: every method, answer and error alike.
            return cast(Ledger, RemoteLedger.open(target))
        if not isinstance(target, str) or not target:
            raise InvalidInput(
                f"target must name a journal (a path or a postgresql:// URL), not {target!r}",
                code=codes.INVALID_ARGUMENT,
                parameter="target",
            )
        return super().open(
            target,
            write=write,
            lock_timeout_s=lock_timeout_s,
            checkpoint_every=checkpoint_every,
            allow_corrupt=allow_corrupt,
        )

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.journal.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
