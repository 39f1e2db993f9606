"""Scripted CLI sessions made comparable from run to run: the values that differ
(the journal id and the hashes it seeds, file-name stamps, a probe's timings, sizes)
become stable placeholders. The text and JSON golden transcripts share this."""

from __future__ import annotations

import os
import re


def placeholders(text: str) -> str:
    names: dict[str, str] = {}

    def name(kind: str, value: str) -> str:
        if value not in names:
            names[value] = f"<{kind}{sum(v.startswith('<' + kind) for v in names.values()) + 1}>"
        return names[value]

    def stable(kind: str) -> object:
        return lambda m: name(kind, m.group(0))

    # A printed follow-up command names its journal by absolute path: the session's
    # working directory (a fresh temporary one) becomes a placeholder.
    text = text.replace(os.getcwd() + os.sep, "<cwd>/")
    text = re.sub(r"\b[0-9a-f]{64}\b", stable("hash"), text)  # type: ignore[arg-type]
    text = re.sub(r"\b[0-9a-f]{32}(?=[),\s\"])", stable("id"), text)  # type: ignore[arg-type]
    # The genesis and repair records take the wall clock (journal-level, no --at).
    text = re.sub(r"20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:.]{15}Z", _now_or_kept, text)
    text = re.sub(r"\.(quarantine|torn)\.(\d+)\.\d{16,}", r".\1.\2.<ns>", text)
    text = re.sub(r"after \d+\.\d{3}s", "after <duration>", text)
    # Sizes and the projection version move with every payload change elsewhere.
    text = re.sub(r"\b[\d,]+ bytes", "<n> bytes", text)
    # A report's audit commands name the journal by absolute path: its size moves with
    # the working directory's length.
    text = re.sub(r'("out":"[^"]*\.html","bytes":)\d+', r"\1<n>", text)
    text = re.sub(r"projection ledger/[\d.:]+", "projection <version>", text)
    text = re.sub(r'"projection_version":"[^"]+"', '"projection_version":"<version>"', text)
    text = re.sub(r"memory: .*? incomplete\)", "memory: <estimate>", text)
    return text


def _now_or_kept(match: re.Match[str]) -> str:
    return match.group(0) if match.group(0).startswith("2026-11-29T") else "<now>"
