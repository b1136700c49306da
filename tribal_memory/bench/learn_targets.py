"""Issue 15's targets for the learning benchmark, checked against a report."""

from __future__ import annotations

from typing import Any


def targets(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 15's targets checked against a report: ``[{name, value, target, met}]``.

    Empty when the report lacks the ``plain`` or ``learned`` variant.
    """
    v = report["variants"]
    learned, plain = v.get("learned"), v.get("plain")
    if learned is None or plain is None:
        return []
    checks: list[tuple[str, float | None, float, bool]] = []

    def add(name: str, value: float | None, target: float, higher_is_better: bool = True) -> None:
        met = value is not None and (value >= target if higher_is_better else value <= target)
        checks.append((name, value, target, met))

    def recall(variant: dict[str, Any], set_name: str) -> float:
        return float(variant[set_name]["recall@10"])

    if report["protocol"] == "feedback-half":
        session = "session" in report["feedback"]
        add(
            "new: learned recall@10 >= plain + 0.05"
            if session
            else "new: learned recall@10 >= plain + 0.02",
            recall(learned, "new"),
            recall(plain, "new") + (0.05 if session else 0.02),
        )
        if session:
            add("repeat: learned recall@10 >= 0.95", recall(learned, "repeat"), 0.95)
        else:
            add(
                "new_fed: learned recall@10 >= plain + 0.10",
                recall(learned, "new_fed"),
                recall(plain, "new_fed") + 0.10,
            )
            add(
                "new_unfed: learned recall@10 >= plain - 0.005",
                recall(learned, "new_unfed"),
                recall(plain, "new_unfed") - 0.005,
            )
            add(
                "repeat: used memories in the top 10 >= 0.99",
                learned["repeat"]["used_in_top10"],
                0.99,
            )
            add(
                "reword: used memories in the top 10 >= 0.97",
                learned["reword"]["used_in_top10"],
                0.97,
            )
        add("new: false cache hits <= 1%", learned["new"]["false_hit_rate"], 0.01, False)
        if "other_agent" in learned and "other_agent" in plain:
            add(
                "other agent new_fed: learned recall@10 >= plain + 0.10",
                learned["other_agent"]["new_fed"]["recall@10"],
                plain["other_agent"]["new_fed"]["recall@10"] + 0.10,
            )
        add(
            "new: learned p50 <= 1.5 x plain p50",
            learned["new"]["p50_ms"],
            1.5 * plain["new"]["p50_ms"],
            False,
        )
    else:
        add(
            "unseen phrasings: learned hit@5 >= plain + 0.10",
            learned["new_fed"]["hit@5"],
            plain["new_fed"]["hit@5"] + 0.10,
        )
        add(
            "other facts: learned hit@5 >= plain - 0.005",
            learned["new_unfed"]["hit@5"],
            plain["new_unfed"]["hit@5"] - 0.005,
        )
    return [
        {"name": n, "value": val, "target": round(t, 4), "met": met} for n, val, t, met in checks
    ]
