"""quotaledger: a hash-chained, fsynced journal that decides benchmark admission.

    from quotaledger import Ledger

    with Ledger.open("quotaledger.jsonl") as ledger:
        ledger.admit(goal="g", run="r1", arm="baseline", forecast_tpm=2000)

`Ledger` (in `quotaledger.api`) is the in-process API; the CLI (`quotaledger.cli`) is a
thin layer over it. Expected failures raise subclasses of `quotaledger.Error`, each
carrying its public `code` and `exit_code`.

The names are resolved lazily: the CLI imports this package on every call, and a
runner's `quotaledger observe` must not pay for the services it does not use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

if TYPE_CHECKING:
    from quotaledger.api import Ledger
    from quotaledger.journal.errors import (
        Error,
        InvalidInput,
        JournalCorrupt,
        JournalPoisoned,
        LockTimeout,
        ServerUnreachable,
        StorageFailure,
        TimeInFuture,
        TimeRegression,
    )

__all__ = [
    "Error",
    "InvalidInput",
    "JournalCorrupt",
    "JournalPoisoned",
    "Ledger",
    "LockTimeout",
    "ServerUnreachable",
    "StorageFailure",
    "TimeInFuture",
    "TimeRegression",
    "__version__",
]

_ERRORS = frozenset(__all__) - {"Ledger", "__version__"}


def __getattr__(name: str) -> Any:
    # Resolved on first use: the CLI imports this package before it pauses the cycle
    # collector for its start-up (cli/main.py), so what loads here is collected over.
    if name == "Ledger":
        from quotaledger.api import Ledger

        return Ledger
    if name in _ERRORS:
        from quotaledger.journal import errors

        return getattr(errors, name)
    raise AttributeError(f"module 'quotaledger' has no attribute {name!r}")
