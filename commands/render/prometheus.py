"""A `metrics` answer in Prometheus' text exposition format (version 0.0.4): what
`metrics` prints, `metrics --out` writes and GET /metrics answers."""

from __future__ import annotations

from quotaledger.usecases.operator import MetricsAnswer, Number


def prometheus_text(answer: MetricsAnswer) -> str:
    """The text exposition format (version 0.0.4) of a `metrics` answer."""
    lines: list[str] = []
    for name, family in answer.metrics.items():
        lines.append(f"# HELP {name} {_escape_help(family.help)}")
        lines.append(f"# TYPE {name} {family.type}")
        for sample in family.samples:
            labels = ",".join(
                f'{key}="{_escape_label(str(value))}"' for key, value in sample.labels.items()
            )
            full = name + sample.suffix
            selector = f"{full}{{{labels}}}" if labels else full
            lines.append(f"{selector} {_number(sample.value)}")
    return "\n".join(lines) + "\n"


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _escape_label(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: Number | None) -> str:
    if value is None:
        return "NaN"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    return repr(float(value))
