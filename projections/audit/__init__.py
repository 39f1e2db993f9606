"""Operators' questions of a goal's history (SPEC §7): audit, what-if, timelines.

Pure: every function works on records and folded state handed to it, never on a
file. The decisions are re-taken with `projections.capacity.decide_admission`, looked
up on the module at call time: the audit runs the very function `admit` runs (and a
rule changed in the code shows as "not reproduced").

- `audit_decision`: the state just before a journaled decision, the recorded request
  and time -> replayed decision and whether it reproduces the record; the
  application explains it (binding constraint, shortfall, window composition from
  `top_contributors`, reservations, cooldown, coverage, earliest admissible time).
- `WhatIf`: a counterfactual replay of a goal's recorded admission requests under a
  changed config, listing the decisions that flip.
- `Timeline`: the goal's usage, reservations and limits sampled at every time they
  change (event times, samples leaving the window, leases and cooldowns ending), for
  the report's step charts.

- `Validity`: a goal's runs and which of them quota touched (SPEC §13.2), each with
  its verdict.

- `check_decisions`: every journaled decision re-taken on a fold of its own from
  genesis (`verify --decisions`, `import`): a well-chained but impossible history.

The package by job: `audit`, `decisions`, `whatif`, `timeline` and `validity`
(`goalfold` is the fold of one goal that `whatif` and `timeline` share); every public
name is re-exported here.
"""

from quotaledger.projections.audit.audit import (
    FIGURES_ADDED_LATER,
    HOST_DECISION_KINDS,
    SETTLEMENT_DECISION_KINDS,
    TOP_CONTRIBUTORS,
    Audit,
    Contributor,
    RecordedDecision,
    SettlementAudit,
    audit_decision,
    audit_settlement,
    compare,
    recorded_decision,
    top_contributors,
)
from quotaledger.projections.audit.decisions import (
    DecisionCheck,
    NotReproduced,
    check_decisions,
    redecide,
)
from quotaledger.projections.audit.goalfold import (
    GoalFold,
)
from quotaledger.projections.audit.timeline import (
    Cooldown,
    DimensionPoint,
    Point,
    Timeline,
    merged_cooldowns,
    point_of,
    seconds,
)
from quotaledger.projections.audit.validity import (
    VERDICTS,
    HostSummary,
    RunHistory,
    Validity,
    ValidityRow,
)
from quotaledger.projections.audit.whatif import (
    Flip,
    Overrides,
    PromotionFlip,
    WhatIf,
    override_price,
    price_changes,
)

__all__ = [
    "FIGURES_ADDED_LATER",
    "HOST_DECISION_KINDS",
    "SETTLEMENT_DECISION_KINDS",
    "TOP_CONTRIBUTORS",
    "VERDICTS",
    "Audit",
    "Contributor",
    "Cooldown",
    "DecisionCheck",
    "DimensionPoint",
    "Flip",
    "GoalFold",
    "HostSummary",
    "NotReproduced",
    "Overrides",
    "Point",
    "PromotionFlip",
    "RecordedDecision",
    "RunHistory",
    "SettlementAudit",
    "Timeline",
    "Validity",
    "ValidityRow",
    "WhatIf",
    "audit_decision",
    "audit_settlement",
    "check_decisions",
    "compare",
    "merged_cooldowns",
    "override_price",
    "point_of",
    "price_changes",
    "recorded_decision",
    "redecide",
    "seconds",
    "top_contributors",
]
