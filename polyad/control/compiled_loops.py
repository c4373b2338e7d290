"""A while loop, and its reverse sweep, as one compiled function each where the backend compiles them
(``backend.fusion.while_function`` / ``sweep_function``: NumPy's writes one Numba function of scalars
for a loop of small values): no Python per step, as XLA runs a while loop. The loop's checkpoint stores
and the sweep's schedule are decided here, on the host, before the call: the online schedule decides
by the step alone, so which row each step is stored into is a table made once per number of slots
(``store_table``), and the sweep's actions (``OnlineSchedule.reverse``) become a program of rows.

Both apply to compiled bodies (``CompiledBody``: ``pa.jit``'s, and the eager replay of a small state's
step) on the backend's own arrays; anything else, or a loop the backend cannot translate, returns None
and ``while_loop`` runs its Python loop. The values are those of the compiled step, to rounding."""

import polyad.control.schedules as schedules
import polyad.core.dispatch as dispatch
from polyad.control.closure import graph_key, pullback_graph
from polyad.core import Tensor
from polyad.core.avals import shape_of
from polyad.graph.compiler import optimize

RESTORE, STORE, ADVANCE, TURN = 0, 1, 2, 3  # the sweep program's instructions (rows: kind, argument)
WHOLE_AFTER = 1000  # steps of a body's Python loops before its whole loop is translated and compiled
FIRST_TABLE = 1024  # steps of the first store table; it doubles when a loop runs longer
NO_LIMIT = 1 << 62
_TABLES = {}  # slots -> [rows (list), the schedule after them, {stored step: row}, free rows, next row]


def store_table(slots, steps):
    """The row of the stacks each of the first ``steps`` steps is stored into by ``OnlineSchedule(slots)``
    (-1: not stored), a list; made once per ``slots`` and extended as longer loops ask. Rows fill from 0
    up (the unused ones are the last), and a step dropped leaves its row to the step stored instead."""
    state = _TABLES.get(slots)
    if state is None:
        state = _TABLES[slots] = [[], schedules.OnlineSchedule(slots), {}, [], 0]
    rows, schedule, row_of, free, _ = state
    for step in range(len(rows), steps):
        row = -1
        for action in schedule.before_step(step):
            if type(action) is schedules.Free:
                free.append(row_of.pop(action.step))
            elif free:
                row = row_of[step] = free.pop()
            else:
                row = row_of[step] = state[4]
                state[4] += 1
        rows.append(row)
    return rows[:steps]


def schedule_slots(save_slots):
    """``(slots, rows)`` of a loop's ``save_slots`` that a whole loop takes, or None ("sqrt"): the online
    schedule's slots (None: every state) and the rows of output: "none" (no schedule), "fixed" (``slots``
    rows, the unused ones -1), "stored" (as many as were stored: ``("bounded", s)`` and "all")."""
    if save_slots is None:
        return 0, "none"
    if type(save_slots) is int:
        return save_slots, "fixed"
    if isinstance(save_slots, tuple) and save_slots[0] == "bounded":
        return save_slots[1], "stored"
    if save_slots == "all":
        return None, "stored"
    return None


def _table_array(xp, slots, length):
    key = (id(xp), slots, length)
    if key not in _ARRAYS:
        _ARRAYS[key] = xp.asarray(store_table(slots, length) if length else [], dtype=xp.int64)
    return _ARRAYS[key]


_ARRAYS = {}  # (namespace, slots, steps) -> the store table as an array of the namespace


def _compiled(body):
    return getattr(body, "compiled_pullback", None) is not None and body.body.graph is not None


def _backend(args):
    if any(isinstance(a, Tensor) for a in args):
        return None
    backend = dispatch.backend_of(list(args))
    fusion = getattr(backend, "fusion", None) if backend is not None else None
    return backend if fusion is not None and getattr(fusion, "while_function", None) is not None else None


def count_steps(body, steps):
    """Note that ``body``'s Python loop ran ``steps`` steps (a compiled body's whole loop is compiled once
    its loops have run ``WHOLE_AFTER``)."""
    shared = getattr(body, "_shared", None)
    if shared is not None:
        shared["steps"] = shared.get("steps", 0) + steps


def run_whole_while(args, cond, body, n_carry, n_cond, save_slots):
    """``run_while``'s outputs by one compiled call, or None (then the caller runs its own loop)."""
    kind = schedule_slots(save_slots)
    if not (_compiled(cond) and _compiled(body)) or kind is None:
        return None
    backend = _backend(args)
    if backend is None:
        return None
    if body._shared.get("steps", 0) < WHOLE_AFTER:  # a loop that runs a few steps does not pay Numba
        return None
    shared = body._shared.setdefault("whole_while", {})
    # the condition by what it computes: an eager loop traces a new one at each call (same graph), and
    # another condition may come with the same body
    key = graph_key(cond.body.graph, "cond")
    if key is None:
        return None
    if key not in shared:
        shared[key] = backend.fusion.while_function(
            optimize(cond.body.graph), optimize(body.body.graph), n_carry, n_cond
        )
    run = shared[key]
    if run is None:
        return None
    xp = backend.xp
    carry = args[:n_carry]
    slots, kept = kind
    length = shared.get("length", FIRST_TABLE)  # the table the last run of this loop needed
    while True:
        # "stored": rows for what this length can store (the table's rows fill from 0 up)
        rows = 0 if kept == "none" else slots if kept == "fixed" else min(slots or length, length)
        index = xp.full((rows,), -1, dtype=xp.int64)
        stacks = [xp.zeros((rows, *shape_of(c)), dtype=c.dtype) for c in carry]
        table = _table_array(xp, slots, length) if kept != "none" else _table_array(xp, 0, 0)
        limit = length if kept != "none" else NO_LIMIT
        out = run(*args, extra=(table, limit, index, *stacks))
        if out is None:
            return None
        *final, steps, within = out
        if within:
            break
        length *= 2  # ran past the table: a longer one, and the loop again from its start
        shared["length"] = length
    if kept == "none":
        return tuple(final)
    if kept == "stored":  # as many rows as were stored: the first ones
        used = min(steps, slots or steps)
        index, stacks = index[:used], [s[:used] for s in stacks]
    return (*final, xp.asarray(steps), index, *stacks)


def run_whole_sweep(args, body, n_carry, n_cond, n_closure, slots):
    """``reverse_sweep``'s outputs by one compiled call, or None (then the caller runs its own sweep)."""
    kind = schedule_slots(slots)
    if not _compiled(body) or kind is None or kind[1] == "none":
        return None
    backend = _backend(args)
    if backend is None:
        return None
    ct = args[:n_carry]
    carry = args[n_carry : 2 * n_carry]
    c_closure = args[2 * n_carry : 2 * n_carry + n_cond]
    closure = args[2 * n_carry + n_cond : 2 * n_carry + n_cond + n_closure]
    count, index, *stacks = args[2 * n_carry + n_cond + n_closure :]
    if body._shared.get("steps", 0) < WHOLE_AFTER:
        return None
    shared = body._shared.setdefault("whole_sweep", {})
    if "run" not in shared:
        graph, floats = pullback_graph(body.body, [*carry, *closure])
        shared["run"] = backend.fusion.sweep_function(
            optimize(body.body.graph), optimize(graph), n_carry, floats
        )
    run = shared["run"]
    if run is None:
        return None
    xp = backend.xp
    length = int(count)
    row_of = {}
    for j in range(shape_of(index)[0]):
        s = int(index[j])
        if s >= 0:
            row_of[s] = j
    program, free, rows = [], [], shape_of(index)[0]
    schedule = schedules.OnlineSchedule.resumed(kind[0], list(row_of), length)
    for action in schedule.reverse(length):
        what = type(action)
        if what is schedules.Turn:
            program.append((TURN, 0))
        elif what is schedules.Restore:
            program.append((RESTORE, row_of[action.step]))
        elif what is schedules.Store:
            if free:
                row = free.pop()
            else:
                row, rows = rows, rows + 1
            row_of[action.step] = row
            program.append((STORE, row))
        elif what is schedules.Free:
            free.append(row_of.pop(action.step))
        else:
            program.append((ADVANCE, action[1] - action[0]))
    extra = rows - shape_of(index)[0]
    if extra:  # rows for the states the sweep stores itself, after the primal pass's
        stacks = [xp.concat([s, xp.zeros((extra, *shape_of(s)[1:]), dtype=s.dtype)]) for s in stacks]
    elif any(what == STORE for what, _ in program):
        stacks = [xp.asarray(s, copy=True) for s in stacks]  # written to: the primal pass's stay as they are
    code = xp.reshape(xp.asarray(program, dtype=xp.int64), (len(program), 2))
    out = run(*ct, *closure, extra=(code, *stacks))
    if out is None:
        return None
    return (*out[:n_carry], *[xp.zeros_like(c) for c in c_closure], *out[n_carry:])
