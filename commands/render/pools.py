"""What `pool configure` prints."""

from __future__ import annotations

from quotaledger.render.per_event import cooldown_text, num, promoted_text
from quotaledger.render.queue import queue_lines
from quotaledger.usecases.capacity import SpendView
from quotaledger.usecases.pools import PoolConfigureAnswer, PoolsAnswer, PoolView


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


def pool_lines(name: str, pool: PoolView) -> list[str]:
    """One pool: each dimension's load against its target, each member's share, load
    and borrowing, the cooldown and the queue."""
    lines = [f"pool {name} as of {pool.at}: {cooldown_text(pool.cooldown_until, pool.at)}"]
    for dimension, d in pool.dimensions.items():
        provider = "" if d.provider_used is None else f", provider says {num(d.provider_used)}"
        lines.append(
            f"  {dimension}: load {num(d.load)}/{num(d.target)} (quota {num(d.quota)}; usage "
            f"{num(d.usage)}, reserved {num(d.reserved)}{provider})"
        )
    for goal, member in pool.members.items():
        loads = ", ".join(
            f"{dimension} {num(m.load)} (borrowed {num(m.borrowed)}, guaranteed unused "
            f"{num(m.protected)})"
            for dimension, m in member.dimensions.items()
        )
        lines.append(
            f"  member {goal}: share {num(member.share)}, borrowing limit "
            f"{num(member.borrowing_limit)}, lending limit {num(member.lending_limit)}, "
            f"priority {member.priority}" + (f"; {loads}" if loads else "")
        )
    if not pool.members:
        lines.append("  no members (configure --goal G --pool P --pool-share F)")
    spend = pool.spend
    if spend.cap_tokens is not None or spend.cap_usd is not None or spend.usd:
        lines.append(f"  {spend_text(spend)}")
    if isinstance(pool.queue, list) and pool.queue:
        lines += queue_lines(pool.queue)
    else:
        lines.append(f"  queue: {pool.queue_length} waiting")
    if isinstance(pool.provider, dict):
        for dimension, report in pool.provider.items():
            live = "live" if report.live else "expired"
            lines.append(
                f"  provider {dimension}: {num(report.remaining)} of {num(report.limit)} left "
                f"({live}, reported {report.reported_at})"
            )
    return lines


def pools_text(answer: PoolsAnswer) -> str:
    if not answer.pools:
        return "no pools (quotaledger pool configure)"
    return "\n".join(line for name, pool in answer.pools.items() for line in pool_lines(name, pool))


def spend_text(spend: SpendView) -> str:
    """Spend since cap_since (all of it without a cap), against each cap."""
    since = "in total" if spend.since is None else f"since {spend.since}"
    text = f"spend {since}: {num(spend.tokens)} tokens, ${num(spend.usd)}"
    if spend.unpriced_tokens:
        text += f" ({spend.unpriced_tokens} tokens unpriced)"
    if spend.cap_tokens is not None:
        text += f"; {num(spend.remaining_tokens)} of {spend.cap_tokens} tokens left"
    if spend.cap_usd is not None:
        text += f"; ${num(spend.remaining_usd)} of ${num(spend.cap_usd)} left"
    reserved = spend.reserved_tokens or spend.reserved_usd
    if reserved and (spend.cap_tokens is not None or spend.cap_usd is not None):
        text += f" after reserved {num(spend.reserved_tokens)} tokens, ${num(spend.reserved_usd)}"
    return text
