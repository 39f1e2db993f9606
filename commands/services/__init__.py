"""Application services: open the journal, fold, decide, append, answer."""
