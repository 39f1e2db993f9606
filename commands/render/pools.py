"""What `pool configure` prints."""

from __future__ import annotations

from quotaledger.render.per_event import num, promoted_text
from quotaledger.usecases.pools import PoolConfigureAnswer


def pool_configure_text(answer: PoolConfigureAnswer) -> str:
    config = answer.config
    limits = ", ".join(
        f"{d} {num(limit.target)}/{num(limit.quota)}" for d, limit in config.limits.items()
    )
    head = f"pool {answer.pool} " + ("configured" if answer.appended else "unchanged")
    lines = [
        f"{head}: {limits or 'no limits'} (target/quota); cached input weight "
        f"{num(config.cached_input_weight)}; cooldown {config.cooldown_base_s}s "
        f"doubling to {config.cooldown_max_s}s"
    ]
    if config.cap_tokens is not None or config.cap_usd is not None:
        caps = [
            f"{num(config.cap_tokens)} tokens" if config.cap_tokens is not None else "",
            f"${num(config.cap_usd)}" if config.cap_usd is not None else "",
        ]
        lines.append(f"caps: {', '.join(c for c in caps if c)} since {config.cap_since}")
    for field, (old, new) in answer.changes.items():
        lines.append(f"  {field}: {old} -> {new}")
    return "\n".join(lines) + promoted_text(answer.promoted)
