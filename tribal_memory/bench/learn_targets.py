"""The learning benchmark's targets (issue 27's; issue 15's for session feedback), checked."""

from __future__ import annotations

from typing import Any, Literal, NamedTuple


class _Target(NamedTuple):
    """One target: the learned variant's figure at ``metric`` against a bound.

    ``against``: ``"plain+"`` (the plain variant's figure at ``metric`` plus
    ``bound``), ``"plain*"`` (that figure times ``bound``) or ``"fixed"``
    (``bound`` itself). ``optional``: checked only when both variants have
    ``metric[0]``.
    """

    name: str
    metric: tuple[str, ...]
    against: Literal["plain+", "plain*", "fixed"]
    bound: float
    higher_is_better: bool = True
    optional: bool = False


_SESSION_FIRST: tuple[_Target, ...] = (
    _Target("new: learned recall@10 >= plain + 0.05", ("new", "recall@10"), "plain+", 0.05),
    _Target("repeat: learned recall@10 >= 0.95", ("repeat", "recall@10"), "fixed", 0.95),
)
"""Protocol ``feedback-half`` with session feedback: the first checks."""
_PER_QUERY_FIRST: tuple[_Target, ...] = (
    _Target("new: learned recall@10 >= plain + 0.03", ("new", "recall@10"), "plain+", 0.03),
    _Target("new_fed: learned recall@10 >= plain + 0.08", ("new_fed", "recall@10"), "plain+", 0.08),
    _Target("new_unfed: learned recall@10 >= plain", ("new_unfed", "recall@10"), "plain+", 0.0),
    _Target(
        "repeat: used memories in the top 10 >= 0.99", ("repeat", "used_in_top10"), "fixed", 0.99
    ),
    _Target(
        "reword: used memories in the top 10 >= 0.97", ("reword", "used_in_top10"), "fixed", 0.97
    ),
)
"""Protocol ``feedback-half`` with per-query feedback: the first checks."""
_NOISY_FIRST: tuple[_Target, ...] = (
    _Target("new: learned recall@10 >= plain + 0.015", ("new", "recall@10"), "plain+", 0.015),
    _Target(
        "new_unfed: learned recall@10 >= plain - 0.005",
        ("new_unfed", "recall@10"),
        "plain+",
        -0.005,
    ),
)
"""Protocol ``feedback-half`` with noisy feedback: the first checks."""
_FEEDBACK_HALF_LAST: tuple[_Target, ...] = (
    _Target("new: false cache hits <= 1%", ("new", "false_hit_rate"), "fixed", 0.01, False),
    _Target(
        "other agent new_fed: learned recall@10 >= plain + 0.10",
        ("other_agent", "new_fed", "recall@10"),
        "plain+",
        0.10,
        optional=True,
    ),
    _Target("new: learned p50 <= 1.3 x plain p50", ("new", "p50_ms"), "plain*", 1.3, False),
)
"""Protocol ``feedback-half``, either feedback: the checks after the first."""
_HELD_OUT: tuple[_Target, ...] = (
    _Target(
        "unseen phrasings: learned hit@5 >= plain + 0.06", ("new_fed", "hit@5"), "plain+", 0.06
    ),
    _Target(
        "other facts: learned hit@5 >= plain - 0.005", ("new_unfed", "hit@5"), "plain+", -0.005
    ),
)
"""Any other protocol."""


def _at(variant: dict[str, Any], metric: tuple[str, ...]) -> Any:
    value: Any = variant
    for key in metric:
        value = value[key]
    return value


def targets(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The targets checked against a report: ``[{name, value, target, met}]``.

    Empty when the report lacks the ``plain`` or ``learned`` variant.
    """
    v = report["variants"]
    learned, plain = v.get("learned"), v.get("plain")
    if learned is None or plain is None:
        return []
    if report["protocol"] != "feedback-half":
        checks = _HELD_OUT
    elif "session" in report["feedback"]:
        checks = _SESSION_FIRST + _FEEDBACK_HALF_LAST
    elif "noisy" in report["feedback"]:
        checks = _NOISY_FIRST + _FEEDBACK_HALF_LAST
    else:
        checks = _PER_QUERY_FIRST + _FEEDBACK_HALF_LAST
    rows: list[dict[str, Any]] = []
    for check in checks:
        if check.optional and not (check.metric[0] in learned and check.metric[0] in plain):
            continue
        value: float | None = _at(learned, check.metric)
        target = check.bound
        if check.against == "plain+":
            target = _at(plain, check.metric) + check.bound
        elif check.against == "plain*":
            target = check.bound * _at(plain, check.metric)
        met = value is not None and (value >= target if check.higher_is_better else value <= target)
        rows.append({"name": check.name, "value": value, "target": round(target, 4), "met": met})
    return rows
