"""The checkpointing schedules of polyad/control/schedules.py, replayed by its reference executor
(``simulate``: a toy integer state) and checked against independent references: the optimal advance
count by dynamic programming over every split (Griewank and Walther's recurrence), the best checkpoint
placement known in hindsight for the online schedule, and the counts the issue gives."""

import ast
import math
import pathlib
import sys
from functools import cache
from itertools import combinations, islice

import pytest

from polyad.control import schedules as sch
from polyad.control.schedules import (
    Advance,
    Free,
    OnlineSchedule,
    Restore,
    Store,
    Turn,
    auto_slots,
    binomial_schedule,
    binomial_steps,
    online_steps,
    parse_memory,
    plan,
    sqrt_schedule,
    sqrt_slots,
    sqrt_steps,
)
from polyad.testing.schedule_replay import simulate


@cache
def optimal_advances(length, slots):
    """The fewest advances reversing ``length`` steps with ``slots`` slots, by trying every first
    checkpoint: advance to it, reverse the right part with one slot fewer, then the left part."""
    if length <= 1:
        return 0
    if slots == 1:
        return sum(range(length))  # advance from x_0 to each step in turn
    return min(
        m + optimal_advances(length - m, slots - 1) + optimal_advances(m, slots) for m in range(1, length)
    )


@cache
def hindsight_reverse(length, slots):
    """The fewest advances of a reverse sweep from checkpoints placed knowing ``length``: the gaps between
    stored states, reversed last to first, gap j with ``slots - j`` slots (its first sweep included)."""
    best = optimal_advances(length, slots)
    if slots > 1:
        for m in range(1, length):
            best = min(best, optimal_advances(m, slots) + hindsight_reverse(length - m, slots - 1))
    return best


def repetitions(length, slots):
    r = 0
    while math.comb(slots + r, slots) < length:
        r += 1
    return r


def run_online(schedule, length):
    """The primal pass of a while loop of ``length`` steps under ``schedule``, on the toy state; returns
    the stored steps and the most stored at once."""
    stored, peak = {}, 0
    for i in range(length):
        for action in schedule.before_step(i):
            if type(action) is Free:
                del stored[action.step]
            else:
                assert action == Store(i)
                stored[i] = i
        peak = max(peak, len(stored))
    assert sorted(stored) == list(schedule.stored)
    return sorted(stored), peak


# --- the binomial schedule --------------------------------------------------------------------------


@pytest.mark.parametrize("slots", range(1, 9))
def test_binomial_count_is_the_optimum_and_the_schedule_achieves_it(slots):
    for length in range(0, 61):
        expected = optimal_advances(length, slots)
        assert binomial_steps(length, slots) == expected, (length, slots)
        replay = simulate(binomial_schedule(length, slots), length, slots=slots)
        assert replay.advances == expected, (length, slots)
        assert replay.peak_stored <= slots
        assert replay.max_repeats <= max(repetitions(length, slots), 0)


def test_binomial_count_of_the_issue():
    # the issue's figure: 10^4 steps with 10 slots run the body 10^4 + 57,624 times
    assert binomial_steps(10_000, 10) == 57_624
    replay = simulate(binomial_schedule(10_000, 10), 10_000, slots=10)
    assert (replay.advances, replay.peak_stored, replay.max_repeats) == (57_624, 10, repetitions(10_000, 10))


@pytest.mark.parametrize("length, slots", [(2_000, 5), (5_000, 3), (3_000, 12)])
def test_binomial_count_satisfies_the_optimality_recurrence_at_large_lengths(length, slots):
    # Bellman's equation over every first checkpoint, its terms by the closed form
    best = min(m + binomial_steps(m, slots) + binomial_steps(length - m, slots - 1) for m in range(1, length))
    assert binomial_steps(length, slots) == best


def test_binomial_count_closed_cases_and_large_lengths():
    assert [binomial_steps(length, 1) for length in (0, 1, 2, 10)] == [0, 0, 1, 45]
    assert binomial_steps(10**6, 10**6) == binomial_steps(10**6, 10**6 - 1) == 10**6 - 1
    assert binomial_steps(10**6, 10**6 - 2) == 10**6  # one step fewer stored: one step advanced twice
    for length, slots in [(10**5, 20), (10**6, 10), (10**9, 30), (10**12, 2)]:
        r = repetitions(length, slots) if slots > 2 else math.ceil((math.sqrt(8 * length + 1) - 3) / 2)
        assert math.comb(slots + r - 1, slots) < length <= math.comb(slots + r, slots)
        assert binomial_steps(length, slots) == r * length - math.comb(slots + r, slots + 1)
    counts = [binomial_steps(10**5, s) for s in range(1, 60)]
    assert all(a > b for a, b in zip(counts, counts[1:]))  # each slot more saves advances


def test_binomial_schedule_of_a_long_loop_is_lazy_and_iterative():
    first = list(islice(binomial_schedule(10**12, 40), 200))  # no recursion, no work on the unseen part
    assert first[0] == Store(0) and type(first[1]) is Advance
    replay = simulate(binomial_schedule(10**5, 20), 10**5, slots=20)
    assert replay.advances == binomial_steps(10**5, 20)


def test_plan_primal_sweep_and_reverse_sweep():
    for length, slots in [(1, 1), (2, 1), (7, 3), (100, 4), (1000, 10)]:
        p = plan(length, slots)
        primal, reverse = p.primal(), list(p.reverse())
        assert primal + reverse == list(p.actions())
        assert {type(a) for a in primal} <= {Store, Advance} and len(primal) <= 2 * slots
        assert reverse[0] == Turn(length - 1)
        # the primal sweep ends at x_{length-1}: every advance joins the last one's end
        assert sum(a.stop - a.start for a in primal if type(a) is Advance) == length - 1
        assert (
            simulate(p.actions(), length, slots=slots).advances == p.advances == binomial_steps(length, slots)
        )


def test_plan_store_every_state_and_the_choices():
    p = plan(50)
    assert (p.slots, p.advances) == (50, 49)
    replay = simulate(p.actions(), 50, slots=50)
    assert (replay.advances, replay.max_repeats, replay.stores) == (49, 1, 49)
    assert plan(50, 1000).slots == 50
    assert plan(0).advances == 0 and list(plan(0).actions()) == [] and plan(0).primal() == []
    assert plan(10_000, "sqrt").slots == sqrt_slots(10_000)
    for bad in (0, -3, 2.5, True, "fast"):
        with pytest.raises(ValueError, match="checkpoints must be None"):
            plan(10, bad)
    with pytest.raises(ValueError, match="needs carry_bytes"):
        plan(10, "auto", max_memory="1GiB")


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: binomial_steps(-1, 3), "length"),
        (lambda: binomial_steps(5, 0), "slots"),
        (lambda: binomial_steps(5, True), "slots"),
        (lambda: binomial_steps("5", 3), "length"),
        (lambda: binomial_schedule(5, 2.0), "slots"),
        (lambda: sqrt_slots(-2), "length"),
        (lambda: OnlineSchedule(0), "slots"),
        (lambda: auto_slots(10, 0, "1GiB"), "carry_bytes"),
        (lambda: auto_slots(10, 8, "1GiB", reserved_bytes=-1), "reserved_bytes"),
    ],
)
def test_bad_arguments_are_refused_by_name(call, name):
    with pytest.raises((TypeError, ValueError), match=name):
        call()


# --- sqrt ---------------------------------------------------------------------------------------------


def test_sqrt_schedule_two_sweeps_in_about_sqrt_2l_slots():
    for length in list(range(1, 300)) + [10_000, 54_321]:
        slots = sqrt_slots(length)
        replay = simulate(sqrt_schedule(length), length, slots=slots)
        assert replay.max_repeats <= 2  # at most two sweeps: the primal one and one recomputation
        assert replay.advances == sqrt_steps(length) == binomial_steps(length, slots)
        assert replay.advances <= 2 * (length - 1)  # recomputation at most length - 1 steps
        assert slots <= math.sqrt(2 * length) + 1 <= 2 * math.sqrt(length) + 1
        if slots > 1:  # the fewest slots: one fewer needs a third sweep somewhere
            assert simulate(binomial_schedule(length, slots - 1), length).max_repeats >= 3


# --- memory budgets -----------------------------------------------------------------------------------


def test_parse_memory():
    assert parse_memory("400MiB") == 400 * 2**20
    assert parse_memory("1.5GB") == 1_500_000_000
    assert parse_memory(" 2 kib ") == 2048 and parse_memory("3e3") == 3000 and parse_memory(7) == 7
    for bad in ("", "12 parsecs", "-1GB", 0, -5, 1.5, True, None, "GB"):
        with pytest.raises(ValueError, match="max_memory must be a positive number of bytes"):
            parse_memory(bad)


def test_auto_slots_takes_the_most_that_fit():
    carry, reserved = 3_000, 10_000
    for slots in (1, 2, 7, 40):
        budget = reserved + (slots + 1) * carry  # the slots and the working state
        assert auto_slots(None, carry, budget, reserved) == slots
        if slots > 1:
            assert auto_slots(None, carry, budget - 1, reserved) == slots - 1
    assert auto_slots(12, carry, 10**9) == 12  # everything stored where it fits
    assert auto_slots(10_000, 8 * 2**20, "400MiB", reserved_bytes=2**25) == 45
    p = plan(10_000, "auto", carry_bytes=8 * 2**20, max_memory="400MiB", reserved_bytes=2**25)
    assert (p.slots, p.advances) == (45, binomial_steps(10_000, 45))
    with pytest.raises(ValueError, match="at least 2 are needed .* at least 16000 bytes"):
        auto_slots(100, carry, reserved + 2 * carry - 1, reserved)


# --- loops of unknown length --------------------------------------------------------------------------


@pytest.mark.parametrize("slots", range(1, 9))
def test_online_schedule_stays_within_its_slots_and_reverses_correctly(slots):
    for length in list(range(0, 61)) + [200, 1000]:
        schedule = OnlineSchedule(slots)
        stored, peak = run_online(schedule, length)
        assert peak <= slots
        replay = simulate(schedule.reverse(length), length, slots=slots, stored=stored)
        assert schedule.advances == length + replay.advances
        assert schedule.recomputations == replay.advances
        assert schedule.advances == online_steps(length, slots)
        if length >= 1:  # dropping the primal pass's useless last step leaves an offline schedule
            assert schedule.advances >= binomial_steps(length, slots) + 1
        if length <= 60:  # never better than the best placement chosen in hindsight
            assert schedule.recomputations >= hindsight_reverse(length, slots)


@pytest.mark.parametrize("slots", range(1, 8))
def test_online_schedule_is_optimal_up_to_c_s_plus_2_choose_2(slots):
    # up to C(s+2, 2) steps an online schedule can match the placement chosen knowing the length
    # (Stumm and Walther 2010); this one does at every length in that range
    for length in range(1, math.comb(slots + 2, 2) + 1):
        schedule = OnlineSchedule(slots)
        run_online(schedule, length)
        schedule.reverse(length)
        assert schedule.recomputations == hindsight_reverse(length, slots), length


@pytest.mark.parametrize("slots", [3, 4])
def test_no_online_placement_is_optimal_at_every_length_beyond_c_s_plus_2_choose_2(slots):
    # exhaustive: the placements optimal at each length (in hindsight) that an online schedule can reach
    # from one optimal at the length before (it only drops states and stores the newest)
    def optimal_placements(length):
        best, found = length + hindsight_reverse(length, slots), set()
        for n in range(slots):
            for rest in combinations(range(1, length), n):
                stored = (0, *rest)
                ends = (*stored[1:], length)
                cost = length + sum(
                    optimal_advances(e - b, slots - j) for j, (b, e) in enumerate(zip(stored, ends))
                )
                if cost == best:
                    found.add(stored)
        return found

    limit = math.comb(slots + 2, 2)
    reachable = {(0,)}
    for length in range(2, limit + 2):
        reachable = {
            c for c in optimal_placements(length) if any(set(c) - {length - 1} <= set(r) for r in reachable)
        }
        assert bool(reachable) == (length <= limit), length


@pytest.mark.parametrize("length, slots", [(1000, 5), (1000, 10), (10_000, 10), (10_000, 20), (20_000, 50)])
def test_online_schedule_is_close_to_the_offline_optimum(length, slots):
    # scripts/checkpoint_counts.py prints the ratios (1.00 to 1.02 at these sizes)
    ratio = online_steps(length, slots) / binomial_steps(length, slots)
    assert 1 < ratio < 1.05


def test_online_schedule_extremes_and_misuse():
    schedule = OnlineSchedule(None)  # store every state: nothing recomputed
    stored, peak = run_online(schedule, 30)
    assert peak == 30
    simulate(schedule.reverse(30), 30, stored=stored)
    assert (schedule.advances, schedule.recomputations) == (30, 0)
    schedule = OnlineSchedule(1)  # only x_0: each step recomputed from the start
    stored, _ = run_online(schedule, 20)
    assert stored == [0]
    assert simulate(schedule.reverse(20), 20, slots=1, stored=stored).advances == sum(range(20))
    schedule = OnlineSchedule(4)
    assert list(OnlineSchedule(3).reverse(0)) == []
    with pytest.raises(RuntimeError, match="known once reverse"):
        _ = schedule.advances
    with pytest.raises(ValueError, match="expected step 0 next, got 1"):
        schedule.before_step(1)
    run_online(schedule, 5)
    with pytest.raises(ValueError, match="the loop ran 5 steps"):
        schedule.reverse(6)
    schedule.reverse(5)
    with pytest.raises(RuntimeError, match="already"):
        schedule.before_step(5)


# --- the reference executor itself ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "actions, why",
    [
        ([Store(0), Advance(0, 1), Turn(1), Restore(0), Free(0), Turn(0)], "expected the turn at step 2"),
        ([Store(0), Advance(0, 1), Turn(2)], "the working state is x_1"),
        ([Store(0), Advance(0, 1), Store(1), Advance(1, 2), Store(2)], "3 states stored, slots=2"),
        ([Store(0), Advance(0, 2), Turn(2), Restore(1)], "not stored"),
        ([Store(0), Advance(0, 2), Turn(2), Restore(0), Advance(0, 1), Turn(1)], "steps 0 down to 0"),
        (
            [Store(0), Advance(0, 2), Turn(2), Restore(0), Advance(0, 1), Turn(1), Restore(0), Turn(0)],
            "still",
        ),
        ([Store(1)], "the working state is x_0"),
        ([Store(0), Advance(1, 3)], "the working state is x_0"),
    ],
)
def test_simulate_catches_broken_schedules(actions, why):
    with pytest.raises(AssertionError, match=why):
        simulate(actions, 3, slots=2)


def test_schedules_module_uses_the_standard_library_only():
    tree = ast.parse(pathlib.Path(sch.__file__).read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}  # fmt: skip
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported


@pytest.mark.parametrize("slots", [1, 2, 3, 5, 12])
def test_a_resumed_schedule_reverses_as_the_one_that_ran(slots):
    """A while loop's reverse sweep resumes the primal pass's schedule from its stored steps rather than
    running every decision again: the same actions and counts for every length."""
    for length in [1, 2, 7, 40, 333]:
        primal = OnlineSchedule(slots)
        for i in range(length):
            primal.before_step(i)
        resumed = OnlineSchedule.resumed(slots, primal.stored, length)
        assert list(resumed.reverse(length)) == list(primal.reverse(length))
        assert (resumed.advances, resumed.recomputations) == (primal.advances, primal.recomputations)
    with pytest.raises(ValueError, match="stored steps for"):
        OnlineSchedule.resumed(2, [0, 1, 2], 3)
