"""The one exception type users see, and the exit codes of the CLI.

Every error a user can cause or fix (a broken patch, a corrupt baseline, an engine
that fails, an interrupted run) is a :class:`PatchgateError`: a one-line ``message``
saying what went wrong and where (file or step), and a ``hint`` saying what to do
next. The CLI catches it once, prints ``ERROR <message>`` and ``  hint: <hint>``, and
exits with :data:`EXIT_ERROR`. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

EXIT_ACCEPTED = 0  # the change passed every check
EXIT_REJECTED = 1  # the change was evaluated and rejected
EXIT_ERROR = 2  # bad input, engine failure or interruption: no verdict
EXIT_INCONCLUSIVE = 3  # evaluated, but the run could not show the change is not slower


class PatchgateError(Exception):
    """A user-facing error: ``message`` (what and where) and ``hint`` (next step)."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} (hint: {self.hint})"


SIGTERM = "SIGTERM"  # the KeyboardInterrupt's text when the CLI's SIGTERM handler raised it


def interrupted_by(e: KeyboardInterrupt) -> str:
    """The words after "interrupted" in an error message: " by SIGTERM" where the CLI's
    SIGTERM handler raised ``e`` (a CI runner's cancel), nothing for Ctrl-C."""
    return " by SIGTERM" if str(e) == SIGTERM else ""


# The interruptions the CLI's signal handlers raised during this command, in order. A
# library may catch the KeyboardInterrupt and raise its own error instead (SGLang's
# engine start reports its scheduler, killed by the same signal, as dead): the error
# that reaches the CLI is then reported as the interruption it followed.
_signalled: list[KeyboardInterrupt] = []


def note_signal(e: KeyboardInterrupt) -> KeyboardInterrupt:
    """Record the interruption a signal handler is about to raise; returns it."""
    _signalled.append(e)
    return e


def take_signal() -> KeyboardInterrupt | None:
    """The first interruption a signal raised since the last call (None if none), and
    forget them all: each interruption is reported once."""
    first = _signalled[0] if _signalled else None
    _signalled.clear()
    return first


def interruption(e: BaseException) -> KeyboardInterrupt | None:
    """``e`` if it is an interruption, else the one a signal raised before ``e`` ended
    the run (taken: :func:`take_signal`), else None."""
    noted = take_signal()
    return e if isinstance(e, KeyboardInterrupt) else noted
