"""A reference executor for checkpoint schedules (``polyad.control.schedules``): ``simulate`` replays a
schedule's actions on a toy state and checks each one, the tests' independent check of every schedule.

Example:
    >>> from polyad.control.schedules import sqrt_schedule
    >>> replay = simulate(sqrt_schedule(10_000), 10_000)
    >>> replay.peak_stored, replay.advances, replay.max_repeats
    (140, 19858, 2)
"""

from collections.abc import Iterable
from typing import NamedTuple

from polyad.control.schedules import Action, Advance, Free, Restore, Store, Turn


class Replay(NamedTuple):
    """What ``simulate`` counted: ``advances`` (untaped runs of F), ``stores`` (Store actions),
    ``peak_stored`` (most states stored at once) and ``max_repeats`` (the most untaped runs of one step)."""

    advances: int
    stores: int
    peak_stored: int
    max_repeats: int


def simulate(
    actions: Iterable[Action], length: int, slots: int | None = None, stored: Iterable[int] | None = None
) -> Replay:
    """Replay a schedule on a toy state (``x_i`` is the integer ``i``, F adds one) and check it.

    Checked: each action applies to the state it names (an advance starts from ``x_start``, a store keeps
    ``x_step``, a restore or free names a stored state); every step is turned exactly once, in the order
    ``length-1`` down to ``0``, on the right state; at most ``slots`` states are stored at once; nothing is
    left stored at the end.

    Args:
        actions: the schedule.
        length: the loop's number of steps.
        slots: the most states allowed stored at once; None: not checked.
        stored: for the reverse sweep of an ``OnlineSchedule``, the steps stored by the primal pass (the
            working state is then ``x_length``); None: an offline schedule, starting with ``x_0``.

    Returns:
        A ``Replay`` of counts.

    Raises:
        AssertionError: the schedule breaks one of the rules, with the action that did.

    Example:
        >>> from polyad.control.schedules import binomial_schedule
        >>> simulate(binomial_schedule(6, 2), 6, slots=2)
        Replay(advances=8, stores=3, peak_stored=2, max_repeats=2)
    """
    store: dict[int, int | None] = {i: i for i in (stored or ())}
    current: int | None = 0 if stored is None else length
    expected_turn = length - 1
    advances = stores = 0
    peak = len(store)
    repeats: dict[int, int] = {}

    def check(condition, action, why):
        if not condition:
            raise AssertionError(f"{action}: {why}")

    for action in actions:
        if isinstance(action, Advance):
            check(current == action.start, action, f"the working state is x_{current}")
            check(action.start < action.stop <= length, action, "not a forward range of the loop")
            for i in range(action.start, action.stop):
                repeats[i] = repeats.get(i, 0) + 1
            advances += action.stop - action.start
            current = action.stop
        elif isinstance(action, Store):
            check(current == action.step, action, f"the working state is x_{current}")
            check(action.step not in store, action, "already stored")
            store[action.step] = current
            stores += 1
            peak = max(peak, len(store))
            check(slots is None or len(store) <= slots, action, f"{len(store)} states stored, slots={slots}")
        elif isinstance(action, Restore):
            check(action.step in store, action, "not stored")
            current = store[action.step]
        elif isinstance(action, Free):
            check(action.step in store, action, "not stored")
            del store[action.step]
        elif isinstance(action, Turn):
            check(action.step == expected_turn, action, f"expected the turn at step {expected_turn}")
            check(current == action.step, action, f"the working state is x_{current}")
            expected_turn -= 1
            current = None
        else:
            raise AssertionError(f"{action!r}: not an action")
    check(expected_turn == -1, "end", f"steps {expected_turn} down to 0 were never turned")
    check(not store, "end", f"states {sorted(store)} are still stored")
    return Replay(advances, stores, peak, max(repeats.values(), default=0))
