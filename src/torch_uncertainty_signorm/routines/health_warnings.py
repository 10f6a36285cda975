"""When the routine warns about member health: conditions that persist, each once per run.

The :class:`~torch_uncertainty_signorm.routines.member_health.MemberHealth` metrics stay on the
routine (device placement, summing across processes through ``log_dict``); this module holds
only the policy, which needs memory between validations. It is a plain object the routine
calls with the conditions it has just computed, not a callback: the conditions exist only
inside the routine's own ``on_{validation,test}_epoch_end``, which Lightning runs after the
callbacks' hooks of the same name.
"""

from __future__ import annotations

from lightning.pytorch.utilities import rank_zero_warn

from .member_health import HealthCondition, health_message

__all__ = ["HealthWarnings"]

#: A condition and its member (``None``: the ensemble).
_Key = tuple[str, int | None]


class HealthWarnings:
    """Warns each (condition, member) once per run.

    During ``fit``, a condition is warned about when found at two validations in a row, so that
    the first epoch's transients (BatchNorm running statistics still catching up) stay silent,
    or at the last validation, when ``fit`` ends; after testing, at once. :meth:`turn_off`
    silences them for the rest of the run (the routine still logs the health metrics).
    """

    def __init__(self) -> None:
        self._warned: set[_Key] = set()
        self._last: dict[_Key, str] = {}  # the last validation's conditions, said
        #: Why the warnings are off (:meth:`turn_off`); ``None`` while they are on.
        self.off_because: str | None = None

    def turn_off(self, reason: str) -> None:
        """Warn about nothing from now on, for ``reason``: data on which the advice does not
        apply, such as stand-in data of random pixels, where every member is at chance."""
        self.off_because = reason

    def start_fit(self) -> None:
        """Forget the previous run: warn again in a new one."""
        self._warned.clear()
        self._last = {}

    def validated(self, conditions: list[HealthCondition], step: int) -> None:
        """Take a validation's conditions during ``fit``; warn about those also found at the
        previous validation."""
        messages = _messages(conditions, step, "val")
        previous, self._last = self._last, messages
        self._warn({key: text for key, text in messages.items() if key in previous})

    def tested(self, conditions: list[HealthCondition], step: int) -> None:
        """Warn about a test's conditions."""
        self._warn(_messages(conditions, step, "test"))

    def end_fit(self) -> None:
        """Warn about the state ``fit`` ends in: the last validation's conditions, even if seen
        once."""
        self._warn(self._last)

    def _warn(self, messages: dict[_Key, str]) -> None:
        if self.off_because is not None:
            return
        for key, message in messages.items():
            if key not in self._warned:
                self._warned.add(key)
                rank_zero_warn(message)


def _messages(conditions: list[HealthCondition], step: int, stage: str) -> dict[_Key, str]:
    return {(c.condition, c.member): health_message(c, step, stage) for c in conditions}
