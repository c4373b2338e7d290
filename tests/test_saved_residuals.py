"""pa.saved_residuals / pa.print_saved_residuals: what reverse mode keeps for the backward pass, checked
against what the tape must hold (the inputs of each op it recorded) and against the loop's schedule (a
checkpointed scan keeps at most ``s`` carries, ``checkpoints=None`` every step's values)."""

import pytest

import polyad as pa
from polyad import xp

N = 300


def _x():
    return xp.linspace(0.1, 1.0, N, dtype=xp.float64)


def test_a_straight_line_function_keeps_each_ops_inputs_once():
    res = pa.saved_residuals(lambda x: xp.sum(xp.sin(x) * x), _x())
    # x (sin's input and the product's), sin(x), the product (sum's input): three arrays of N float64
    assert [r.where for r in res] == ["argument 0", "op 'multiply' argument 0", "op 'sum' argument 0"]
    assert all(r.shape == (N,) for r in res) and sum(r.nbytes for r in res) == 3 * N * 8


def _diffusion(k, steps, checkpoints):
    def step(u, _):
        return u + 0.1 * k * (xp.roll(u, 1) + xp.roll(u, -1) - 2 * u), None

    u, _ = pa.scan(step, _x(), length=steps, checkpoints=checkpoints)
    return xp.sum(u * u)


def _loop_bytes(res):
    return sum(r.nbytes for r in res if r.where.startswith("op 'scan' residuals"))


@pytest.mark.parametrize("s", [2, 5])
def test_a_checkpointed_scan_keeps_at_most_s_carries(s):
    k = xp.asarray(0.3)
    recordings = []
    for steps in (40, 160):
        res = pa.saved_residuals(_diffusion, k, steps, s)
        kept = [r for r in res if r.where == "op 'scan' residuals"]
        assert 1 <= len(kept) <= s and all(r.shape == (N,) for r in kept)
        # and the last step's recording (Revolve's taped last primal step: the reverse sweep's first turn),
        # the inputs of its ops: one step's values whatever the number of steps
        recording = sum(r.nbytes for r in res if r.where.startswith("op 'scan' residuals: op "))
        assert 0 < recording <= 10 * N * 8  # the step has 8 ops on arrays of N
        assert _loop_bytes(res) <= s * N * 8 + recording
        recordings.append(recording)
    assert recordings[0] == recordings[1]


def test_a_scan_without_checkpoints_keeps_every_step():
    k = xp.asarray(0.3)
    small, large = (_loop_bytes(pa.saved_residuals(_diffusion, k, n, None)) for n in (40, 80))
    assert small >= 40 * N * 8  # at least one carry per step
    assert large == 2 * small  # linear in the steps


def test_non_array_arguments_pass_through_and_pytrees_are_differentiated(capsys):
    params = {"w": _x(), "b": xp.asarray(0.5)}
    res = pa.saved_residuals(lambda p, scale: xp.sum(xp.exp(p["w"] * scale) + p["b"]), params, 2.0)
    assert {r.where for r in res} >= {"argument 0"} and len(res) >= 2
    pa.print_saved_residuals(lambda p, scale: xp.sum(xp.exp(p["w"] * scale) + p["b"]), params, 2.0)
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == len(res) + 1 and printed[-1].startswith("total ")
    assert printed[-1].endswith(f"in {len(res)} arrays")
