"""Pure folds of journal events into state, and the pure decisions made on them.

Nothing here does I/O. `ledger.PROJECTOR` is what a `journal.Journal` folds with.
"""
