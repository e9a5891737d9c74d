"""One error hierarchy; the CLI turns each into a one-line message and an exit code."""

from __future__ import annotations

from collections.abc import Sequence


class PgfsbenchError(Exception):
    """Base of every error pgfsbench reports to the user."""

    exit_code = 1


class SpecError(PgfsbenchError):
    """The spec file (or a --set override) is invalid."""

    exit_code = 2


class UsageError(PgfsbenchError):
    """The command line asks for something that cannot be done as asked."""

    exit_code = 2


class NeedsRootError(PgfsbenchError):
    """Provisioning (losetup, mkfs, mount, sysctl) needs root."""

    exit_code = 3


class GuardError(PgfsbenchError):
    """A device or path was refused by the safety guard."""

    exit_code = 4


class CapabilityError(PgfsbenchError):
    """The installed tools cannot do what the spec asks (before anything is created)."""

    exit_code = 5


class ProvisionError(PgfsbenchError):
    """Creating or tearing down storage failed."""


class InstanceError(PgfsbenchError):
    """PostgreSQL could not be initialised, started or stopped."""


class WorkloadError(PgfsbenchError):
    """The load generator failed."""


class Stalled(WorkloadError):
    """The workload made no progress for the spec's stall_timeout and was ended."""


class RunsFailed(PgfsbenchError):
    """The campaign completed, but some of its runs failed or were aborted."""

    exit_code = 6


class HostBusy(PgfsbenchError):
    """Another campaign holds this host (one campaign per host)."""

    exit_code = 7


class StoreError(PgfsbenchError):
    """The results store could not be read or written."""


class Interrupted(PgfsbenchError):
    """SIGINT or SIGTERM arrived; everything is undone on the way out."""

    exit_code = 130


class TimeoutExpired(PgfsbenchError):
    """A wait with a deadline ran out."""


class CommandError(PgfsbenchError):
    """An external command failed; carries the command, exit code and stderr."""

    def __init__(self, argv: Sequence[str], returncode: int | None, stderr: str, stdout: str = ""):
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr
        self.stdout = stdout
        detail = last_meaningful_line(stderr) or last_meaningful_line(stdout)
        status = "timed out" if returncode is None else f"exited {returncode}"
        msg = f"{' '.join(self.argv[:6])}{' ...' if len(self.argv) > 6 else ''} {status}"
        super().__init__(f"{msg}: {detail}" if detail else msg)


def last_meaningful_line(text: str) -> str:
    """The last line that says something (tools print their reason last)."""
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line:
            return line[:300]
    return ""


def did_you_mean(name: str, choices: Sequence[str]) -> str:
    """ " (did you mean 'X'?)" for a choice close to ``name`` (a glob's stars ignored), else
    the choices themselves when they are few."""
    import difflib

    unique = list(dict.fromkeys(choices))
    close = difflib.get_close_matches(name.replace("*", "").replace("?", ""), unique, n=1)
    if close:
        return f" (did you mean {close[0]!r}?)"
    if 0 < len(unique) <= 8:
        return f" (there are: {', '.join(unique)})"
    return ""
