"""Start-up CPU of `python -c "import quotaledger"` by install kind, run by hand:

    python3 tests/bench/install_kinds.py [RUNS]

It builds three scratch venvs (a wheel, a strict editable install, a default
editable install with its import-hook finder; no dependencies needed, the package
imports lazily) and times them interleaved, so the machine's load hits each alike.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
KINDS = {
    "wheel": [str(REPO)],
    "strict editable": ["-e", str(REPO), "--config-settings", "editable_mode=strict"],
    "default editable": ["-e", str(REPO)],
}


def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        pythons = {}
        for name, spec in KINDS.items():
            root = Path(scratch) / name.replace(" ", "-")
            venv.create(root, with_pip=True)
            pip = [str(root / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps"]
            subprocess.run([*pip, *spec], check=True, capture_output=True)
            pythons[name] = str(root / "bin" / "python")
        cpu_ms: dict[str, list[float]] = {name: [] for name in KINDS}
        for _ in range(runs):
            for name, python in pythons.items():
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                subprocess.run([python, "-c", "import quotaledger"], check=True)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                spent = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
                cpu_ms[name].append(spent * 1000)
        for name, samples in cpu_ms.items():
            samples.sort()
            print(f"{name:17s} median {samples[len(samples) // 2]:.1f} ms CPU")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
