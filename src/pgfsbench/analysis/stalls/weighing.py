"""Weighing the hypotheses: the best supported cause, its confidence, and why the others
were ruled out."""

from __future__ import annotations

from typing import Any, TypedDict

from pgfsbench.analysis.stalls.evidence import Context
from pgfsbench.analysis.stalls.model import BY_PLACE_ONLY, Finding, family_of
from pgfsbench.analysis.stalls.thresholds import GOOD, WEAK

# ---------------------------------------------------------------- weighing


class Verdict(TypedDict):
    """What weighing the findings of an episode concluded (a StallEpisode's cause fields)."""

    cause: str
    confidence: str
    evidence: tuple[str, ...]
    alternatives: tuple[tuple[str, float, str], ...]
    missing: tuple[str, ...]
    contributing: tuple[str, ...]
    blockers: tuple[dict[str, Any], ...]


def weigh(findings: list[Finding], ctx: Context) -> Verdict:
    """The cause, its confidence, evidence, the alternatives it beat and what is missing."""
    missing = tuple(ctx.missing())
    supported = sorted((f for f in findings if f.support and f.score > 0), key=lambda f: -f.score)
    best = supported[0] if supported else None
    if best is not None:  # what set the best one off comes first, when well supported
        root = next(
            (f for f in supported if best.key in f.explains and f.score >= 0.5 * best.score), None
        )
        best = root or best
    if best is None or best.score < 0.5:
        why = "no known cause fits the evidence of these seconds"
        if missing:
            why += f" ({', '.join(missing)} not recorded)"
        considered = sorted((f for f in findings if f.support), key=lambda f: -f.score)
        near = tuple((f.key, round(f.score, 2), f.why_not()) for f in considered[:4])
        return {
            "cause": "unknown",
            "confidence": "low",
            "evidence": (why,),
            "alternatives": near,
            "missing": missing,
            "contributing": (),
            "blockers": (),
        }
    family = family_of(best.key) | best.explains
    rivals = [
        f
        for f in findings
        if f.key not in family
        and f is not best
        and not (f.key in BY_PLACE_ONLY and best.decisive and not best.contested)
    ]
    runner_up = max((f.score for f in rivals if f.support), default=0.0)
    rival_decisive = any(f.decisive and not f.contested and f.score > 0 for f in rivals)
    if (
        best.decisive
        and not best.contested
        and (best.score >= 1.3 or runner_up <= 0)
        and runner_up <= 0.5 * best.score
        and not rival_decisive
    ):
        confidence = "high"
    elif best.score >= WEAK + GOOD - 1e-9 and runner_up <= 0.75 * best.score:
        confidence = "medium"
    else:
        confidence = "low"
    shown = {c.text for c in best.support}
    contributing = tuple(
        f.key
        for f in supported
        if f is not best
        and f.key in family
        and f.score >= 0.5
        and not {c.text for c in f.support} <= shown
    )
    beaten = [
        f
        for f in findings
        if f is not best and f.key not in contributing and (f.support or f.against)
    ]
    beaten.sort(key=lambda f: (-bool(f.support), -f.score))
    evidence = tuple(c.text for c in sorted(best.support, key=lambda c: -c.weight))
    evidence += tuple(f"against: {c.text}" for c in best.against)
    return {
        "cause": best.key,
        "confidence": confidence,
        "evidence": evidence,
        "alternatives": tuple((f.key, round(f.score, 2), f.why_not()) for f in beaten[:4]),
        "missing": missing,
        "contributing": contributing,
        "blockers": best.blockers,
    }
