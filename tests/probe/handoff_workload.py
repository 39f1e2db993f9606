"""Seed 003's workload: two resident workers hand one large anonymous mapping back and
forth. The holder frees its mapping BEFORE the other allocates, so the group never
holds two mappings at once, yet a sequential per-process read can count both.

    python handoff_workload.py DIR SIZE_MIB HANDOFFS timed HOLD_S
    python handoff_workload.py DIR SIZE_MIB 1 controlled

Files in DIR: `pids.json` {"parent", "holder", "other"} once both workers run;
`ready` when the first holder has touched its mapping. Controlled mode waits for
`go` before the handoff, writes `done` when the new holder has touched its mapping,
then both stay resident until `finish` appears (the test writes it once the round
that read them both has ended: a fixed stay would let the old holder exit mid-round
on a loaded machine) and exit.
"""

from __future__ import annotations

import json
import mmap
import os
import sys
import time

PAGE = 4096


def touch(size: int) -> mmap.mmap:
    mapping = mmap.mmap(-1, size)
    for offset in range(0, size, PAGE):
        mapping[offset] = 1
    return mapping


def wait_file(path: str, timeout_s: float = 30.0) -> None:
    end = time.monotonic() + timeout_s
    while not os.path.exists(path):
        if time.monotonic() > end:
            sys.exit(3)
        time.sleep(0.001)


def worker(role_r: int, take_r: int, give_w: int, args: dict) -> None:
    """Wait for a role; the holder allocates first, then handoffs alternate."""
    holds = os.read(role_r, 1) == b"H"
    mapping = None
    handoffs = args["handoffs"]
    done = 0
    if holds:
        mapping = touch(args["size"])
        open(os.path.join(args["dir"], "ready"), "w").close()
    while done < handoffs:
        if holds:
            if args["mode"] == "controlled":
                wait_file(os.path.join(args["dir"], "go"))
            else:
                time.sleep(args["hold_s"])
            assert mapping is not None
            mapping.close()  # munmap: freed before the other allocates
            mapping = None
            os.write(give_w, b"x")
            holds = False
        else:
            if not os.read(take_r, 1):
                break
            mapping = touch(args["size"])
            if args["mode"] == "controlled":
                open(os.path.join(args["dir"], "done"), "w").close()
            holds = True
        done += 1
    if args["mode"] == "controlled":
        wait_file(os.path.join(args["dir"], "finish"), 120.0)
    else:
        time.sleep(args["hold_s"])
    os._exit(0)


def main() -> None:
    directory, size_mib, handoffs, mode = sys.argv[1:5]
    args = {
        "dir": directory,
        "size": int(size_mib) << 20,
        "handoffs": int(handoffs),
        "mode": mode,
        "hold_s": float(sys.argv[5]) if len(sys.argv) > 5 else 0.0,
    }
    role_a, role_b = os.pipe(), os.pipe()
    a_to_b, b_to_a = os.pipe(), os.pipe()
    pid_a = os.fork()
    if pid_a == 0:
        worker(role_a[0], b_to_a[0], a_to_b[1], args)
    pid_b = os.fork()
    if pid_b == 0:
        worker(role_b[0], a_to_b[0], b_to_a[1], args)
    # The lower pid holds first, so a round (ascending pids) reads the holder before
    # the worker it hands to: the order seed 003's counterexample needs.
    holder, other = sorted((pid_a, pid_b))
    os.write(role_a[1], b"H" if pid_a == holder else b"O")
    os.write(role_b[1], b"H" if pid_b == holder else b"O")
    with open(os.path.join(directory, "pids.json.tmp"), "w") as handle:
        json.dump({"parent": os.getpid(), "holder": holder, "other": other}, handle)
    os.rename(os.path.join(directory, "pids.json.tmp"), os.path.join(directory, "pids.json"))
    codes = [os.waitpid(pid, 0)[1] for pid in (pid_a, pid_b)]
    sys.exit(0 if all(code == 0 for code in codes) else 1)


if __name__ == "__main__":
    main()
