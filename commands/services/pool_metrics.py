"""The pools' `metrics` families (SPEC §12.1): each pool dimension's load and target,
each member's load and what it borrows beyond its share; the pool's spend and caps
(SPEC §12.4, labelled by pool as the goals' are by goal)."""

from __future__ import annotations

from fractions import Fraction

from quotaledger.projections import capacity as cap
from quotaledger.projections.capacity.pool_decision import number, part_of
from quotaledger.projections.ledger import LedgerState
from quotaledger.services.pool_views import pool_context, pool_last_us
from quotaledger.usecases.operator import MetricFamily, MetricSample

POOL_FAMILIES: tuple[tuple[str, str, str], ...] = (
    ("quotaledger_pool_load", "gauge", "Per pool dimension: max(members' loads, provider use)."),
    ("quotaledger_pool_target", "gauge", "Per pool dimension: the target its members share."),
    ("quotaledger_pool_goal_load", "gauge", "Per pool dimension: one member's own load."),
    (
        "quotaledger_pool_borrowed",
        "gauge",
        "Per pool dimension: what a member uses beyond its share of the target.",
    ),
    (
        "quotaledger_pool_spend_tokens_total",
        "counter",
        "Tokens the pool's members spent (summed as tpm with the pool's weight) since its "
        "cap_since; all of it without a cap.",
    ),
    (
        "quotaledger_pool_spend_usd_total",
        "counter",
        "US dollars of the members' priced observations since the pool's cap_since; all of "
        "them without a cap.",
    ),
    ("quotaledger_pool_spend_cap", "gauge", "A pool's spend cap, by unit (tokens, usd)."),
)


def pool_metrics(
    families: dict[str, MetricFamily],
    ledger: LedgerState,
    at_us: int | None,
    now_us: int,
    only: str | None = None,
) -> None:
    """Every configured pool's samples (`only`: that pool's alone), as of `at_us` (else
    now, on the pool's clock); the families are added only where a pool is."""
    pools = ledger.pools.pools
    names = [name for name in sorted(pools) if pools[name].config and only in (None, name)]
    if names:
        for family, kind, help_text in POOL_FAMILIES:
            families[family] = MetricFamily(kind, help_text)
    for name in names:
        pool = ledger.pools.pools[name]
        if pool.config is None:
            continue
        ctx = pool_context(ledger, name)
        when = at_us if at_us is not None else max(now_us, pool_last_us(ctx))
        pe = cap.pool_evaluate(ctx, when)
        _spend_samples(families, name, pe.spend)
        for dimension, d in pe.dimensions.items():
            labels = {"pool": name, "dimension": dimension}
            families["quotaledger_pool_load"].samples.append(MetricSample(labels, number(d.load)))
            families["quotaledger_pool_target"].samples.append(MetricSample(labels, d.target))
            for goal, member in pool.members.items():
                found = d.members.get(goal)
                load = found.load if found is not None else Fraction(0)
                borrowed = max(Fraction(0), load - part_of(member.share, d.target))
                goal_labels = {"pool": name, "goal": goal, "dimension": dimension}
                families["quotaledger_pool_goal_load"].samples.append(
                    MetricSample(goal_labels, number(load))
                )
                families["quotaledger_pool_borrowed"].samples.append(
                    MetricSample(goal_labels, number(borrowed))
                )


def _spend_samples(families: dict[str, MetricFamily], pool: str, spend: cap.Spend) -> None:
    def add(family: str, value: int | float, **labels: str) -> None:
        families[family].samples.append(MetricSample({"pool": pool, **labels}, value))

    add("quotaledger_pool_spend_tokens_total", spend.tokens)
    add("quotaledger_pool_spend_usd_total", cap.usd_number(spend.usd_micro))
    if spend.cap_tokens is not None:
        add("quotaledger_pool_spend_cap", spend.cap_tokens, unit="tokens")
    if spend.cap_usd_micro is not None:
        add("quotaledger_pool_spend_cap", cap.usd_number(spend.cap_usd_micro), unit="usd")
