"""Apply the rules to the facts: findings, their rendering, and the exit status.

Exit status: 0 every rule that applies is OK; 1 warnings; 2 at least one BAD finding;
3 nothing could be inspected (the data directory or server asked for is not readable).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass

from pgfsbench.advisor.facts import Facts
from pgfsbench.advisor.rules import BY_ID, RULES, Rule, Severity

LAYERS = ("filesystem", "zfs", "block", "kernel", "postgresql", "evidence")
EXIT_COULD_NOT_INSPECT = 3


@dataclass(frozen=True)
class Finding:
    rule: str
    layer: str
    severity: Severity
    title: str
    seen: str  # what was seen ("" when OK)
    why: str
    remedy: str
    source: str

    def as_dict(self) -> dict[str, object]:
        return {
            "rule": self.rule,
            "layer": self.layer,
            "severity": self.severity.name,
            "title": self.title,
            "seen": self.seen,
            "why": self.why,
            "remedy": self.remedy,
            "source": self.source,
        }


def select_rules(only: Sequence[str] = (), ignore: Sequence[str] = ()) -> list[Rule]:
    """Rules by id glob; --only keeps, --ignore drops."""
    chosen = [r for r in RULES if not only or any(fnmatch.fnmatchcase(r.id, p) for p in only)]
    return [r for r in chosen if not any(fnmatch.fnmatchcase(r.id, p) for p in ignore)]


def examine(facts: Facts, rules: Sequence[Rule]) -> tuple[list[Finding], list[str]]:
    """Findings (one per thing seen, or one OK per rule that applied) and the ids of the
    rules that did not apply."""
    findings: list[Finding] = []
    skipped: list[str] = []
    for rule in rules:
        seen = rule.check(facts)
        if seen is None:
            skipped.append(rule.id)
        elif not seen:  # passed: what was observed, never the failure's title
            findings.append(
                Finding(
                    rule.id,
                    rule.layer,
                    Severity.OK,
                    rule.title,
                    getattr(seen, "observed", ""),
                    rule.why,
                    rule.remedy,
                    rule.source,
                )
            )
        else:
            findings += [
                Finding(
                    rule.id,
                    rule.layer,
                    rule.severity,
                    rule.title,
                    s,
                    rule.why,
                    rule.remedy,
                    rule.source,
                )
                for s in seen
            ]
    return findings, skipped


def why_skipped(rule: Rule, facts: Facts) -> str:
    """Why a rule did not apply here, in words."""
    if rule.id == "swappiness" and not facts.memory.get("SwapTotal"):
        return "no swap on this host"
    if rule.layer == "postgresql" or (rule.layer == "evidence" and facts.pg is None):
        return (
            "no PostgreSQL read (give --pgdata or --dsn)"
            if facts.pg is None
            else "the setting or statistic is not known here"
        )
    if rule.layer == "zfs":
        return "no ZFS here" if not facts.zfs else "no ZFS dataset under the paths looked at"
    if rule.layer in ("filesystem", "block") and not facts.paths:
        return "no data directory or --path to look at"
    if facts.pg is None and rule.layer == "kernel":
        return "it matters with PostgreSQL (give --pgdata or --dsn)"
    return "nothing it checks is present here"


def exit_status(findings: Sequence[Finding], inspected: bool) -> int:
    if not inspected:
        return EXIT_COULD_NOT_INSPECT
    worst = max((f.severity for f in findings), default=Severity.OK)
    return int(worst)


def report_json(
    facts: Facts, findings: Sequence[Finding], skipped: Sequence[str], status: int
) -> dict[str, object]:
    counts = {s.name: sum(1 for f in findings if f.severity == s) for s in Severity}
    return {
        "status": status,
        "counts": counts,
        "findings": [f.as_dict() for f in findings],
        "not_applicable": list(skipped),
        "not_applicable_why": {r: why_skipped(BY_ID[r], facts) for r in skipped if r in BY_ID},
        "could_not_read": facts.unread,
        "facts": facts.as_dict(),
    }


def summary_lines(facts: Facts) -> list[str]:
    """What was looked at, one line each."""
    lines = [
        f"host {facts.host.get('hostname')}: {facts.host.get('distribution', '?')}, "
        f"kernel {facts.host.get('kernel')}, {facts.host.get('cpus')} CPUs"
    ]
    if facts.pg is not None:
        how = (
            "asked the running server"
            if facts.pg.source == "server"
            else "read the configuration files (server not queried)"
        )
        version = facts.pg.get("server_version") or (str(facts.pg.major) if facts.pg.major else "?")
        lines.append(f"PostgreSQL {version}: {how}")
    for p in facts.paths:
        opts = ",".join(p.options[:8]) + (",..." if len(p.options) > 8 else "")
        devs = " > ".join(p.devices) if p.devices else ""
        lines.append(f"{p.describe()} [{opts}]" + (f" on {devs}" if devs else ""))
    if facts.zfs:
        lines.append(f"ZFS: {facts.zfs.get('kind')} {facts.zfs.get('version', '')}".rstrip())
    return lines
