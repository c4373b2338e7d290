"""Checkpointing schedules: how to reverse a loop in bounded memory (standard library only).

**The model** (Griewank and Walther, "Algorithm 799: Revolve", ACM TOMS 26(1), 2000). A loop of
``length`` steps maps its state ``x_0 -> x_1 -> ... -> x_length`` by its body F. Reverse mode needs, for
``i = length-1`` down to ``0``, the state ``x_i``, to run F at it with recording and pull the cotangent of
``x_{i+1}`` back to ``x_i``: the *turn* at step ``i``. States are kept in at most ``slots`` checkpoint
slots (``x_0`` takes one), besides the one *working state* the executor computes on. Untaped runs of F
are *advances*; the body runs ``length`` times (the turns) plus the advances.

**Actions.** A schedule is a sequence of small named tuples that an executor replays with one working
state and a dict of stored states (``simulate`` is such an executor, on a toy integer state):

- ``Advance(start, stop)``: the working state is ``x_start``; run F untaped ``stop - start`` times.
- ``Store(step)``: keep (a reference to) the working state, which is ``x_step``.
- ``Restore(step)``: the working state becomes the stored ``x_step``, which stays stored.
- ``Free(step)``: drop the stored ``x_step``.
- ``Turn(step)``: the working state is ``x_step``: run F at it with recording and pull the cotangent back
  (to ``x_step``, and to the loop's constants); the working state is spent. A state's last ``Restore`` is
  followed by its ``Free`` before the ``Turn``, so the slot is released before the recording is made.

**Schedules.**

- ``binomial_schedule(length, slots)``: Revolve's binomial schedule, optimal: the fewest advances
  ``binomial_steps(length, slots)`` that any schedule with ``slots`` slots needs. Its first sweep is the
  primal pass (``Plan.primal()``: advances and stores up to ``x_{length-1}``) and its first turn is
  ``Turn(length-1)``, the last primal step taken with recording: the count is exact for an executor that
  records that step in its forward pass; one that runs it untaped (to return ``x_length`` first) and keeps
  ``x_{length-1}`` as its working state pays one advance more.
- ``slots >= length - 1`` (``plan(length, None)`` takes ``length``): every state the reverse sweep needs
  is stored in the primal sweep: ``length - 1`` advances, none repeated.
- ``sqrt_schedule(length)``: at most two sweeps (no step advanced more than twice) in the fewest slots
  that allow it, ``sqrt_slots(length)`` ~ ``sqrt(2 length)``.
- ``auto_slots``: the most slots a memory budget holds, given the bytes of one carry.
- ``OnlineSchedule``: for loops of unknown length (``while_loop``): decides during the primal pass which
  states to keep in ``slots`` slots, and yields the reverse sweep once the length is known;
  ``OnlineSqrtSchedule``: the same with ``sqrt_slots(steps run)`` slots, growing as the loop runs.

``plan(length, checkpoints, ...)`` is the front door of the loops of known length: it turns their
``checkpoints=`` argument (None, an int, "sqrt" or "auto") into a ``Plan``.
"""

from __future__ import annotations

import bisect
import functools
import math
import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple


class Advance(NamedTuple):
    """Run F untaped from the working state ``x_start`` to ``x_stop``."""

    start: int
    stop: int


class Store(NamedTuple):
    """Keep the working state, ``x_step``, in a slot."""

    step: int


class Restore(NamedTuple):
    """Make the stored ``x_step`` the working state (it stays stored)."""

    step: int


class Free(NamedTuple):
    """Drop the stored ``x_step``."""

    step: int


class Turn(NamedTuple):
    """Run F at the working state ``x_step`` with recording and pull the cotangent back."""

    step: int


Action = Advance | Store | Restore | Free | Turn


# --- argument checks --------------------------------------------------------------------------------


def _check_int(value, name, minimum):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int >= {minimum}, got {value!r} of type {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value}")
    return value


# --- binomial numbers ---------------------------------------------------------------------------------
# beta(k, r) = C(k + r, k): the most steps k slots reverse with no step advanced more than r times
# (Griewank and Walther's eta(s, r)). The rows _repetitions bisects (k >= 3) are cached as growing lists:
# a schedule of 10^6 steps asks for a repetition number once per checkpoint it places.

_BETA_ROWS: dict[int, list[int]] = {}
_BETA_LOCK = threading.Lock()


def _beta_row(k, at_least_value):
    row = _BETA_ROWS.get(k)
    if row is None or row[-1] < at_least_value:
        with _BETA_LOCK:  # two threads extending one row would append the same entry twice
            row = list(_BETA_ROWS.get(k, [1]))
            while row[-1] < at_least_value:
                r = len(row)
                row.append(row[-1] * (k + r) // r)
            _BETA_ROWS[k] = row
    return row


def _beta(k, r):
    if r < 0:
        return 0
    row = _BETA_ROWS.get(k)
    return row[r] if row is not None and r < len(row) else math.comb(k + r, r)


def _repetitions(length, slots):
    """The least r with C(slots + r, slots) >= length: how often the most advanced step runs untaped."""
    if length <= 1:
        return 0
    if slots == 1:
        return length - 1
    if length <= slots + 1:
        return 1
    if slots == 2:  # (r + 1)(r + 2) / 2 >= length
        r = max(0, (math.isqrt(8 * length + 1) - 3) // 2)
        while (r + 1) * (r + 2) // 2 < length:
            r += 1
        return r
    return bisect.bisect_left(_beta_row(slots, length), length)


@functools.lru_cache(maxsize=1 << 16)  # the online schedule re-costs the same gaps again and again
def _advances(length, slots):
    """p(length, slots) = r * length - C(slots + r, slots + 1), r = _repetitions(length, slots)."""
    if length <= 1:
        return 0
    if slots == 1:
        return length * (length - 1) // 2
    r = _repetitions(length, slots)
    return r * length - _beta(slots + 1, r - 1)


def _split(length, slots):
    """Where an optimal schedule stores its next checkpoint in a range of ``length >= 2`` steps whose
    start is stored, with ``slots >= 2`` slots (the start's included): the offset ``m`` minimising
    ``m + p(m, slots) + p(length - m, slots - 1)``. The optimal offsets form an interval; we take its
    smallest, ``max(1, length - beta(slots - 1, r), beta(slots, r - 2))``, which stores fewer checkpoints
    than its largest (7,076 stores against 7,990 over every length <= 60 and slots <= 8; the advance
    counts are compared with a search over every offset in tests/test_schedules.py)."""
    r = _repetitions(length, slots)
    return max(1, length - _beta(slots - 1, r), _beta(slots, r - 2))


# --- offline schedules ----------------------------------------------------------------------------------


def binomial_steps(length: int, slots: int) -> int:
    """The advances of Revolve's binomial schedule: the fewest untaped body runs that reverse a loop of
    ``length`` steps with ``slots`` checkpoint slots (Griewank and Walther 2000, ACM TOMS 26(1)).

    ``p(l, s) = r * l - C(s + r, s + 1)``, where ``r`` is the least integer with ``C(s + r, s) >= l``
    (no step is advanced more than ``r`` times). The count includes the primal sweep (the ``l - 1``
    advances up to ``x_{l-1}``; the last primal step is the first turn), so the body runs ``l + p(l, s)``
    times in all. With ``s >= l - 1`` every state is stored and ``p = l - 1``; with ``s = 1`` it is
    ``l (l - 1) / 2``; ``p(0, s) = p(1, s) = 0``. Exact integer arithmetic.

    Args:
        length: the number of loop steps, an int >= 0.
        slots: the number of states that may be stored at once, ``x_0`` included, an int >= 1.

    Returns:
        The number of advances (int).

    Example:
        >>> binomial_steps(10_000, 10)
        57624
        >>> binomial_steps(5, 4), binomial_steps(5, 1)
        (4, 10)
    """
    _check_int(length, "length", 0)
    _check_int(slots, "slots", 1)
    return _advances(length, slots)


def _reverse_range(start, stop, slots, at_start):
    # Actions reversing steps start..stop-1 with x_start stored and `slots` slots (x_start's included);
    # at_start: the working state is x_start. The recursion of Revolve (store at the split, reverse the
    # right part with one slot fewer, then the left part with as many) runs on an explicit stack of the
    # stored steps: the right part is always reversed first, so the stack's top is the range's start.
    stored = [start]
    current = start if at_start else None
    while stored:
        base = stored[-1]
        if current != base:
            yield Restore(base)
            current = base
        if stop - base == 1:
            stored.pop()
            yield Free(base)
            yield Turn(base)
            stop, current = base, None
            continue
        free = slots - len(stored) + 1
        target = stop - 1 if free == 1 else base + _split(stop - base, free)
        yield Advance(base, target)
        if target == stop - 1:  # no need to store a state turned at once
            yield Turn(target)
            stop, current = target, None
        else:
            yield Store(target)
            stored.append(target)
            current = target


def binomial_schedule(length: int, slots: int) -> Iterator[Action]:
    """Revolve's binomial schedule: reverses ``length`` steps with at most ``slots`` stored states and
    the fewest advances, ``binomial_steps(length, slots)`` (Griewank and Walther 2000).

    No step is advanced more than ``r`` times (``r`` as in ``binomial_steps``). The actions, at most
    ``5 length``, are generated lazily (about half a microsecond each), without recursion, in O(slots)
    memory: 10^6 steps take two to three seconds in all (scripts/checkpoint_counts.py).
    The first action is ``Store(0)`` (a loop of one step is just ``Turn(0)``); the actions before the
    first ``Turn`` are the primal sweep, and the first turn is ``Turn(length - 1)``.

    Args:
        length: the number of loop steps, an int >= 0.
        slots: the number of states that may be stored at once, ``x_0`` included, an int >= 1.

    Returns:
        An iterator of actions (``Advance``, ``Store``, ``Restore``, ``Free``, ``Turn``).

    Example:
        >>> list(binomial_schedule(3, 2))  # doctest: +NORMALIZE_WHITESPACE
        [Store(step=0), Advance(start=0, stop=1), Store(step=1), Advance(start=1, stop=2), Turn(step=2),
         Restore(step=1), Free(step=1), Turn(step=1), Restore(step=0), Free(step=0), Turn(step=0)]
        >>> sum(a.stop - a.start for a in binomial_schedule(10_000, 10) if type(a) is Advance)
        57624
    """
    _check_int(length, "length", 0)
    _check_int(slots, "slots", 1)
    return _schedule(length, slots)


def _schedule(length, slots):
    if length <= 1:  # nothing to store: the working state x_0 is turned at once
        yield from [Turn(0)] * length
        return
    yield Store(0)
    yield from _reverse_range(0, length, slots, at_start=True)


def sqrt_slots(length: int) -> int:
    """The fewest slots with which the binomial schedule reverses ``length`` steps in at most two sweeps:
    the least ``s`` with ``C(s + 2, 2) = (s + 1)(s + 2) / 2 >= length``, about ``sqrt(2 length)``.

    Args:
        length: the number of loop steps, an int >= 0.

    Returns:
        The number of slots, an int >= 1.

    Example:
        >>> sqrt_slots(10_000), sqrt_slots(100)
        (140, 13)
    """
    _check_int(length, "length", 0)
    s = max(1, math.isqrt(2 * length) - 2)
    while (s + 1) * (s + 2) // 2 < length:
        s += 1
    return s


def sqrt_steps(length: int) -> int:
    """The advances of ``sqrt_schedule(length)``: ``2 length - s - 2`` with ``s = sqrt_slots(length)``
    (``length - 1`` where ``s >= length - 1``), so at most ``length - s - 1`` recomputed steps beyond the
    primal sweep.

    Args:
        length: the number of loop steps, an int >= 0.

    Returns:
        The number of advances (int).

    Example:
        >>> sqrt_steps(10_000)
        19858
    """
    return binomial_steps(length, sqrt_slots(length))


def sqrt_schedule(length: int) -> Iterator[Action]:
    """Reverse ``length`` steps in at most two sweeps with about ``sqrt(2 length)`` stored states: the
    binomial schedule with ``sqrt_slots(length)`` slots, whose repetition number is 2 (Griewank and
    Walther 2000): no step is advanced more than twice, the primal sweep included.

    This is the classic "square-root checkpointing" with less memory than its textbook form (store every
    ``sqrt(l)``-th state, then one segment at a time: ``2 sqrt(l)`` states), at the same two sweeps.

    Args:
        length: the number of loop steps, an int >= 0.

    Returns:
        An iterator of actions, as ``binomial_schedule``.

    Example:
        >>> sqrt_slots(10_000), sqrt_steps(10_000)  # states stored at most, body runs in all
        (140, 19858)
    """
    return binomial_schedule(length, sqrt_slots(length))


# --- memory budgets --------------------------------------------------------------------------------------

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_UNITS.update({"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40})


def parse_memory(value: int | str, name: str = "max_memory") -> int:
    """A memory size in bytes from an int or a string such as ``"400MiB"``, ``"1.5GB"``, ``"2e9"``.

    Args:
        value: a positive int (bytes), or a number followed by a unit: B, KB, MB, GB, TB (powers of 1000)
            or KiB, MiB, GiB, TiB (powers of 1024), case-insensitive.
        name: the argument's name, for the error message.

    Returns:
        The number of bytes (int).

    Example:
        >>> parse_memory("400MiB"), parse_memory("1.5GB"), parse_memory(4096)
        (419430400, 1500000000, 4096)
    """
    n = None
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    elif isinstance(value, str):
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*", value)
        unit = _UNITS.get(match.group(2).lower()) if match is not None else None
        if match is not None and unit is not None:
            n = int(float(match.group(1)) * unit)
    if n is None or n <= 0:
        raise ValueError(
            f"{name} must be a positive number of bytes: an int, or a string such as '400MiB' or '1.5GB', "
            f"got {value!r}"
        )
    return n


def auto_slots(length: int | None, carry_bytes: int, max_memory: int | str, reserved_bytes: int = 0) -> int:
    """The most checkpoint slots a memory budget holds (``checkpoints="auto"``).

    The budget is ``max_memory`` less ``reserved_bytes`` (what the executor needs besides the stored
    states: one step's recording, the cotangents, the loop's outputs); it must hold the working state and
    the slots, ``carry_bytes`` each. Fewer slots only cost time, so the largest number that fits is taken;
    ``length`` slots (store every state) where it fits, for a loop of known length.

    Args:
        length: the number of loop steps (int >= 0), or None for a loop of unknown length.
        carry_bytes: the bytes of one state (carry), an int >= 1.
        max_memory: the budget: bytes, or a string such as "400MiB" or "1.5GB".
        reserved_bytes: bytes of the budget not available to the states, an int >= 0.

    Returns:
        The number of slots, an int >= 1 (at most ``max(length, 1)`` for a known length).

    Raises:
        ValueError: the budget does not hold one slot and the working state.

    Example:
        >>> auto_slots(10_000, carry_bytes=8 * 2**20, max_memory="400MiB", reserved_bytes=2**25)
        45
        >>> auto_slots(30, carry_bytes=8 * 2**20, max_memory="1GiB")
        30
    """
    if length is not None:
        _check_int(length, "length", 0)
    _check_int(carry_bytes, "carry_bytes", 1)
    _check_int(reserved_bytes, "reserved_bytes", 0)
    budget = parse_memory(max_memory)
    states = (budget - reserved_bytes) // carry_bytes
    if states < 2:
        raise ValueError(
            f"checkpoints='auto': max_memory={max_memory!r} ({budget} bytes) less reserved_bytes="
            f"{reserved_bytes} leaves {budget - reserved_bytes} bytes, which holds {max(states, 0)} carries "
            f"of {carry_bytes} bytes; at least 2 are needed (one checkpoint and the working state), so "
            f"max_memory must be at least {reserved_bytes + 2 * carry_bytes} bytes"
        )
    slots = states - 1
    return slots if length is None else min(slots, max(length, 1))


# --- the front door of loops of known length ------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """A checkpointing plan for a loop of known length (see ``plan``).

    Attributes:
        length: the number of loop steps.
        slots: the most states stored at once, ``x_0`` included.
        advances: the untaped body runs of the schedule, its primal sweep included (``binomial_steps``).
        checkpoints: what was asked for: None, an int, "sqrt" or "auto".
    """

    length: int
    slots: int
    advances: int
    checkpoints: int | str | None

    def actions(self) -> Iterator[Action]:
        """Every action of the schedule, in order (a fresh iterator each call)."""
        return _schedule(self.length, self.slots)

    def primal(self) -> list[Action]:
        """The primal sweep: the ``Store`` and ``Advance`` actions before the first turn (at most
        ``2 slots`` of them). After them the working state is ``x_{length-1}``."""
        return list(self._split_at_first_turn()[0])

    def reverse(self) -> Iterator[Action]:
        """The actions from the first turn, ``Turn(length - 1)``, on."""
        return self._split_at_first_turn()[1]

    def _split_at_first_turn(self):
        actions = self.actions()
        head = []
        for action in actions:
            if type(action) is Turn:
                return head, _chain_one(action, actions)
            head.append(action)
        return head, iter(())


def _chain_one(first, rest):
    yield first
    yield from rest


def plan(
    length: int,
    checkpoints: int | str | None = None,
    *,
    carry_bytes: int | None = None,
    max_memory: int | str | None = None,
    reserved_bytes: int = 0,
) -> Plan:
    """The checkpointing plan for a loop of ``length`` steps (``pa.scan``, ``pa.fori_loop``).

    Args:
        length: the number of loop steps, an int >= 0.
        checkpoints: None: store every state the reverse sweep needs (``length`` slots, no recomputation:
            ``length - 1`` advances, all in the primal sweep); an int ``s >= 1``: at most ``s`` stored
            states, the binomial schedule (optimal: ``binomial_steps(length, s)`` advances); "sqrt": at most
            two sweeps in ``sqrt_slots(length)`` slots; "auto": the most slots ``max_memory`` holds
            (``auto_slots``).
        carry_bytes: the bytes of one state; "auto" only.
        max_memory: the memory budget (bytes, or a string such as "400MiB"); "auto" only.
        reserved_bytes: bytes of the budget not available to the states; "auto" only.

    Returns:
        A ``Plan``: ``slots``, ``advances``, and its actions (``actions()``, or ``primal()`` then
        ``reverse()``).

    Example:
        >>> p = plan(10_000, 10)
        >>> p.slots, p.advances, p.primal()[:3]
        (10, 57624, [Store(step=0), Advance(start=0, stop=3003), Store(step=3003)])
        >>> plan(1000, "auto", carry_bytes=2**20, max_memory="64MiB").slots
        63
    """
    _check_int(length, "length", 0)
    if checkpoints == "auto":
        if carry_bytes is None or max_memory is None:
            raise ValueError(
                "checkpoints='auto' needs carry_bytes (the bytes of one state) and max_memory (the budget), "
                f"got carry_bytes={carry_bytes!r}, max_memory={max_memory!r}"
            )
        slots = auto_slots(length, carry_bytes, max_memory, reserved_bytes)
    elif checkpoints is None:
        slots = max(length, 1)
    elif checkpoints == "sqrt":
        slots = sqrt_slots(length)
    elif isinstance(checkpoints, int) and not isinstance(checkpoints, bool) and checkpoints >= 1:
        slots = min(checkpoints, max(length, 1))
    else:
        raise ValueError(
            f"checkpoints must be None (store every state), an int >= 1 (the most states stored), 'sqrt' or "
            f"'auto', got {checkpoints!r}"
        )
    return Plan(length, slots, _advances(length, slots), checkpoints)


# --- loops of unknown length ----------------------------------------------------------------------------


class OnlineSchedule:
    """Checkpointing for a loop whose length is known only at its end (``pa.while_loop``).

    During the primal pass the executor calls ``before_step(i)`` before running F at ``x_i``; it returns
    the actions to apply at once (``Free(j)`` and ``Store(i)``, or nothing), which keep at most ``slots``
    states stored. Once the loop has ended after ``length`` steps, ``reverse(length)`` yields the reverse
    sweep: each gap between two stored states is reversed last to first by the binomial schedule with the
    slots free by then (gap ``j`` counted from ``x_0`` gets ``slots - j``).

    Which state to drop (the criterion of Hinze and Sternberg's a-revolve, Optim. Methods Softw. 20(6),
    2005, evaluated at every step): of storing ``x_i`` in place of one stored state, or not storing it, the
    choice whose reverse sweep would cost least if the loop ended after this step; ties go to storing, in
    place of the earliest state. This is optimal (no placement chosen knowing the length does better) for
    every ``length <= C(slots + 2, 2)``, the range in which Stumm and Walther's online algorithm is
    optimal (SIAM J. Sci. Comput. 32(2), 2010), and no online placement can be optimal at every length
    beyond it (tests/test_schedules.py checks both for small ``slots``). Beyond, it stays within a few
    percent of the offline optimum (scripts/checkpoint_counts.py prints the ratios: 1.000 to 1.026 for
    10^3 to 10^5 steps and 5 to 50 slots). Each call costs O(1), O(slots) where a state other than the
    latest is dropped: 2 to 3 microseconds a step on average with 10 to 50 slots.

    The count: ``advances`` = the ``length`` untaped steps of the primal pass (the loop cannot record its
    last step before it knows it is the last) + the reverse sweep's advances; ``recomputations`` = the
    latter alone. The offline optimum for comparison is ``binomial_steps(length, slots)``.

    Args:
        slots: the most states stored at once, ``x_0`` included, an int >= 1; None stores every state.

    Example:
        >>> schedule = OnlineSchedule(slots=3)
        >>> [schedule.before_step(i) for i in range(5)]  # doctest: +NORMALIZE_WHITESPACE
        [(Store(step=0),), (Store(step=1),), (Store(step=2),), (Free(step=1), Store(step=3)),
         (Free(step=2), Store(step=4))]
        >>> list(schedule.reverse(5))[:4]
        [Restore(step=4), Free(step=4), Turn(step=4), Restore(step=3)]
        >>> schedule.advances, schedule.recomputations, binomial_steps(5, 3)
        (7, 2, 5)
    """

    def __init__(self, slots: int | None):
        if slots is not None:
            _check_int(slots, "slots", 1)
        self.slots = slots
        self._stored: list[int] = []  # ascending steps
        self._steps = 0
        self._length: int | None = None
        self._advances: int | None = None
        self._sums = None  # _choose's partial sums over the stored steps (see _interior_candidates)
        self._changed = 0  # the first index of _stored changed since they were computed

    @classmethod
    def resumed(cls, slots: int | None, stored: Iterable[int], steps: int) -> OnlineSchedule:
        """The schedule as a primal pass of ``steps`` ``before_step`` calls left it, storing ``stored``:
        what a loop's primal pass hands its reverse sweep, without running its decisions again.

        Example:
            >>> primal = OnlineSchedule(slots=3)
            >>> _ = [primal.before_step(i) for i in range(9)]
            >>> again = OnlineSchedule.resumed(3, primal.stored, 9)
            >>> list(again.reverse(9)) == list(primal.reverse(9))
            True
        """
        schedule = cls(slots)
        schedule._stored = sorted(stored)
        if slots is not None and len(schedule._stored) > slots:
            raise ValueError(
                f"OnlineSchedule.resumed: {len(schedule._stored)} stored steps for {slots} slots"
            )
        schedule._steps = steps
        return schedule

    @property
    def stored(self) -> tuple[int, ...]:
        """The steps whose states are stored now, ascending."""
        return tuple(self._stored)

    @property
    def advances(self) -> int:
        """Untaped body runs in all: the primal pass's ``length`` and the reverse sweep's."""
        if self._advances is None:
            raise RuntimeError("OnlineSchedule.advances is known once reverse(length) has been called")
        return self._advances

    @property
    def recomputations(self) -> int:
        """Untaped body runs of the reverse sweep: ``advances - length``."""
        return self.advances - (self._length or 0)

    def before_step(self, step: int) -> tuple[Action, ...]:
        """The actions to apply before running F at ``x_step``: ``()``, ``(Store(step),)`` or
        ``(Free(j), Store(step))``.

        Args:
            step: the step about to run: 0, then 1, 2... in order.

        Returns:
            A tuple of actions.
        """
        if self._length is not None:
            raise RuntimeError("OnlineSchedule.before_step: reverse(length) has already been called")
        if step != self._steps:
            raise ValueError(f"OnlineSchedule.before_step: expected step {self._steps} next, got {step!r}")
        self._steps += 1
        stored, slots = self._stored, self.slots
        if slots is None or len(stored) < slots:
            stored.append(step)
            return (Store(step),)
        if slots == 1:
            return ()
        drop = self._choose(step)
        if drop is None:
            return ()
        self._changed = min(self._changed, drop)  # the sums depend on every stored step but the latest
        dropped = stored.pop(drop)
        stored.append(step)
        return (Free(dropped), Store(step))

    def _choose(self, i):
        # The stored steps p[0] = 0 < ... < p[k-1] (k = slots) cut the loop into gaps; gap t, reversed with
        # slots - t slots, costs _advances(its length, slots - t). If the loop ended after step i:
        #   keep x_i out:               P(k-1) + cost([p[k-1], i+1), 1 slot)
        #   store it in place of p[k-1]: P(k-2) + cost([p[k-2], i), 2)
        #   ... in place of p[j], j <= k-2: K(j) + cost([p[k-1], i), 2), where K(j) = P(j-1) + the merged
        #       gap [p[j-1], p[j+1]) with slots-j+1 slots + the gaps after it, each with one slot more;
        # P(m): the first m gaps. Only the terms named here depend on i or on p[k-1]; the rest (the prefix
        # sums and min K(j) over j <= k-3) is kept, and redone only from the first stored step dropped since.
        p, k = self._stored, self.slots
        prefix_k3, prefix_k2, best_low, best_low_j = self._interior_candidates()
        last_gap = p[k - 1] - p[k - 2]
        best_value, best_j = None, None
        if k >= 3:
            best_value = prefix_k3 + _advances(p[k - 1] - p[k - 3], 3)  # j = k-2
            best_j = k - 2
            if best_low_j is not None:
                low = best_low + _advances(last_gap, 3)  # + the gap [p[k-2], p[k-1]) with one slot more
                if low <= best_value:
                    best_value, best_j = low, best_low_j
            best_value += _advances(i - p[k - 1], 2)
        latest = prefix_k2 + _advances(i - p[k - 2], 2)
        if best_value is None or latest < best_value:
            best_value, best_j = latest, k - 1
        keep_out = prefix_k2 + _advances(last_gap, 2) + _advances(i + 1 - p[k - 1], 1)
        return None if keep_out < best_value else best_j

    def _interior_candidates(self):
        # (P(k-3), P(k-2), min over 1 <= j <= k-3 of K(j) less the term of gap k-2, its earliest j), from
        # partial sums over the stored steps p, each entry a function of p[0..index + 1] alone, so that
        # dropping p[d] leaves the entries before d - 1 as they are (a long loop drops many states):
        #   prefix[t] = P(t), the gaps before p[t] with k - u slots each (u: the gap's index);
        #   shifted[j] = the gaps 1..j with one slot more each;
        #   K(j) less the term of gap k-2 = prefix[j-1] + merged gap j + shifted[k-3] - shifted[j], so the
        #   min over j is that of low[j] = prefix[j-1] + merged gap j - shifted[j], kept as a running min.
        p, k = self._stored, self.slots
        if self._sums is None:
            self._sums = ([0] * (k - 1), [0] * (k - 2), [0] * (k - 2), [0] * (k - 2))
        prefix, shifted, low, low_j = self._sums
        for t in range(max(1, self._changed), k - 1):
            prefix[t] = prefix[t - 1] + _advances(p[t] - p[t - 1], k - t + 1)
        for j in range(max(1, self._changed - 1), k - 2):
            shifted[j] = shifted[j - 1] + _advances(p[j + 1] - p[j], k - j + 1)
            value = prefix[j - 1] + _advances(p[j + 1] - p[j - 1], k - j + 1) - shifted[j]
            if j == 1 or value < low[j - 1]:  # strictly less: the earliest j of the minimum
                low[j], low_j[j] = value, j
            else:
                low[j], low_j[j] = low[j - 1], low_j[j - 1]
        self._changed = k
        if k < 4:
            return prefix[k - 3] if k == 3 else 0, prefix[k - 2], None, None
        return prefix[k - 3], prefix[k - 2], low[k - 3] + shifted[k - 3], low_j[k - 3]

    def reverse(self, length: int) -> Iterator[Action]:
        """The reverse sweep of a loop that ran ``length`` steps (one ``before_step`` call each).

        Sets ``advances`` and ``recomputations``. The executor's working state is then ``x_length``,
        which the sweep does not use.

        Args:
            length: the number of steps the loop ran.

        Returns:
            An iterator of actions; each stored state is freed by it.
        """
        _check_int(length, "length", 0)
        if length != self._steps:
            raise ValueError(
                f"OnlineSchedule.reverse: the loop ran {self._steps} steps (before_step calls), got "
                f"length={length}"
            )
        if self._length is not None:
            raise RuntimeError("OnlineSchedule.reverse: already called")
        self._length = length
        self._advances = length + self._recomputed(length)
        return self._reverse_sweep(list(self._stored), length)

    def _gap_slots(self, j):
        return 1 if self.slots is None else self.slots - j  # with every state stored each gap is 1 step

    def _recomputed(self, length):
        ends = self._stored[1:] + [length]
        return sum(_advances(e - b, self._gap_slots(j)) for j, (b, e) in enumerate(zip(self._stored, ends)))

    def _reverse_sweep(self, stored, length):
        ends = stored[1:] + [length]
        for j in range(len(stored) - 1, -1, -1):
            yield from _reverse_range(stored[j], ends[j], self._gap_slots(j), at_start=False)


class OnlineSqrtSchedule(OnlineSchedule):
    """``checkpoints="sqrt"`` for a loop whose length is known only at its end: an ``OnlineSchedule``
    whose slots grow as the loop runs, ``sqrt_slots(i + 1)`` before step ``i`` (about ``sqrt(2 i)``), so
    that after ``length`` steps it holds at most ``sqrt_slots(length)`` states, as ``sqrt_schedule`` does
    for a known length. Its reverse sweep is that of ``OnlineSchedule.resumed(sqrt_slots(length), ...)``.

    The states placed while the slots were fewer are not those the offline schedule would place:
    ``online_sqrt_steps`` counts the advances, 2.03 to 2.08 times the length in all for 1,000 to 30,000
    steps, against the offline ``sqrt_steps``' 1.95 to 1.99 (primal pass included in both).

    Example:
        >>> schedule = OnlineSqrtSchedule()
        >>> _ = [schedule.before_step(i) for i in range(100)]
        >>> schedule.slots == sqrt_slots(100), len(schedule.stored) <= sqrt_slots(100)
        (True, True)
    """

    def __init__(self):
        super().__init__(1)

    def before_step(self, step: int) -> tuple[Action, ...]:
        """As ``OnlineSchedule.before_step``, with ``sqrt_slots(step + 1)`` slots from this step on."""
        want = sqrt_slots(step + 1)
        if want > self.slots:
            self.slots, self._sums, self._changed = want, None, 0  # the partial sums are sized by the slots
        return super().before_step(step)


def online_sqrt_steps(length: int) -> int:
    """The advances of ``OnlineSqrtSchedule`` on a loop of ``length`` steps, primal pass included.

    Args:
        length: the number of loop steps, an int >= 0.

    Returns:
        The number of advances (int); compare ``sqrt_steps(length)``, the offline schedule's.

    Example:
        >>> online_sqrt_steps(10_000), sqrt_steps(10_000)
        (20800, 19858)
    """
    _check_int(length, "length", 0)
    schedule = OnlineSqrtSchedule()
    for i in range(length):
        schedule.before_step(i)
    schedule.reverse(length)
    return schedule.advances


def online_steps(length: int, slots: int) -> int:
    """The advances of ``OnlineSchedule(slots)`` on a loop of ``length`` steps, primal pass included
    (found by running its decisions: O(length) time).

    Args:
        length: the number of loop steps, an int >= 0.
        slots: the most states stored at once, an int >= 1.

    Returns:
        The number of advances (int); compare ``binomial_steps(length, slots)``, the offline optimum.

    Example:
        >>> online_steps(10_000, 10), binomial_steps(10_000, 10)
        (57756, 57624)
    """
    _check_int(length, "length", 0)
    schedule = OnlineSchedule(slots)
    for i in range(length):
        schedule.before_step(i)
    schedule.reverse(length)
    return schedule.advances
