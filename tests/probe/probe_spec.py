"""SPEC §6's field sets for `probe.observed`, written from the spec (not the code) and
shared by the probe tests."""

OBSERVATION_KEYS = {
    "command",
    "candidates",
    "input_revision",
    "exit_code",
    "timed_out",
    "duration_s",
    "memory",
    "reference_bytes",
    "attribution",
    "sidecar",
}
MEMORY_KEYS = {"method", "atomic", "peak_estimate_bytes", "samples", "unavailable_samples"}
