"""Pollution (POLLU, the Test Set for IVP Solvers of Mazzia et al.: 20 species, 25 reactions of an air
pollution model, stiff) with BDF and Radau, against the Test Set's published reference solution at
t = 60; jacfwd against jacrev of the final state by the 25 rate constants (slow)."""

import numpy as np
import pytest
from helpers import to_numpy

import polyad as pa
from polyad.integrate import solve_ivp

xp = pa.xp
# Test Set for IVP Solvers (Mazzia et al.), POLLU: rate constants k1..k25
K = [
    0.35,
    26.6,
    1.23e4,
    8.6e-4,
    8.2e-4,
    1.5e4,
    1.3e-4,
    2.4e4,
    1.65e4,
    9.0e3,
    2.2e-2,
    1.2e4,
    1.88,
    1.63e4,
    4.8e6,
    3.5e-4,
    1.75e-2,
    1.0e8,
    4.44e11,
    1.24e3,
    2.1,
    5.78,
    4.74e-2,
    1.78e3,
    3.12,
]
# reactions: (rate constant index, reactant indices), species numbered from 0
REACTIONS = [
    (0, (0,)),
    (1, (1, 3)),
    (2, (4, 1)),
    (3, (6,)),
    (4, (6,)),
    (5, (6, 5)),
    (6, (8,)),
    (7, (8, 5)),
    (8, (10, 1)),
    (9, (10, 0)),
    (10, (12,)),
    (11, (9, 1)),
    (12, (13,)),
    (13, (0, 5)),
    (14, (2,)),
    (15, (3,)),
    (16, (3,)),
    (17, (15,)),
    (18, (15,)),
    (19, (16, 5)),
    (20, (18,)),
    (21, (18,)),
    (22, (0, 3)),
    (23, (18, 0)),
    (24, (19,)),
]
# the net production of each species: (reaction index, coefficient)
PRODUCTION = {
    0: [
        (0, -1),
        (9, -1),
        (13, -1),
        (22, -1),
        (23, -1),
        (1, 1),
        (2, 1),
        (8, 1),
        (10, 1),
        (11, 1),
        (21, 1),
        (24, 1),
    ],
    1: [(1, -1), (2, -1), (8, -1), (11, -1), (0, 1), (20, 1)],
    2: [(14, -1), (0, 1), (16, 1), (18, 1), (21, 1)],
    3: [(1, -1), (15, -1), (16, -1), (22, -1), (14, 1)],
    4: [(2, -1), (3, 2), (5, 1), (6, 1), (12, 1), (19, 1)],
    5: [(5, -1), (7, -1), (13, -1), (19, -1), (2, 1), (17, 2)],
    6: [(3, -1), (4, -1), (5, -1), (12, 1)],
    7: [(3, 1), (4, 1), (5, 1), (6, 1)],
    8: [(6, -1), (7, -1)],
    9: [(11, -1), (6, 1), (8, 1)],
    10: [(8, -1), (9, -1), (7, 1), (10, 1)],
    11: [(8, 1)],
    12: [(10, -1), (9, 1)],
    13: [(12, -1), (11, 1)],
    14: [(13, 1)],
    15: [(17, -1), (18, -1), (15, 1)],
    16: [(19, -1)],
    17: [(19, 1)],
    18: [(20, -1), (21, -1), (23, -1), (22, 1), (24, 1)],
    19: [(24, -1), (23, 1)],
}
Y0 = [0, 0.2, 0, 0.04, 0, 0, 0.1, 0.3, 0.01, 0, 0, 0, 0, 0, 0, 0, 0.007, 0, 0, 0]
REF = [
    0.5646255480022769e-1,
    0.1342484130422339,
    0.4139734331099427e-8,
    0.5523140207484359e-2,
    0.2018977262302196e-6,
    0.1464541863493966e-6,
    0.7784249118997964e-1,
    0.3245075353396018,
    0.7494013383880406e-2,
    0.1622293157301561e-7,
    0.1135863833257075e-7,
    0.2230505975721359e-2,
    0.2087162882798630e-3,
    0.1396921016840158e-4,
    0.8964884856898295e-2,
    0.4352846369330103e-17,
    0.6899219696263405e-2,
    0.1007803037365946e-3,
    0.1772146513969984e-5,
    0.5682943292316392e-4,
]


def pollution(t, y, k):
    rates = []
    for j, species in REACTIONS:
        r = k[j] * y[species[0]]
        for s in species[1:]:
            r = r * y[s]
        rates.append(r)
    rows = []
    for i in range(20):
        total = 0.0
        for j, c in PRODUCTION[i]:
            total = total + c * rates[j]
        rows.append(total)
    return xp.stack(rows)


def arr(values):
    return xp.asarray(np.asarray(values, dtype=np.float64).tolist(), dtype=xp.float64)


# on array_api_strict the two solves take 40 s (its eager steps run through the namespace): there slow
ON_STRICT_SLOW = [pytest.mark.slow] if pa.get_backend() != "numpy" else []


@pytest.mark.parametrize("method", [pytest.param(m, marks=ON_STRICT_SLOW) for m in ("BDF", "Radau")])
def test_pollution_against_the_reference_solution(method):
    """At rtol 1e-8 each component within 10 x rtol of the reference (relative to the component, or to
    1e-12 for y16, which is 4e-17 there)."""
    sol = solve_ivp(pollution, (0.0, 60.0), arr(Y0), method, args=(arr(K),), rtol=1e-8, atol=1e-14)
    assert sol.success
    ref = np.array(REF)
    error = np.abs(to_numpy(sol.y)[:, -1] - ref) / np.maximum(np.abs(ref), 1e-12)
    assert error.max() <= 10 * 1e-8, (error.max(), error.argmax())


@pytest.mark.slow
@pytest.mark.parametrize("method", ["BDF", "Radau"])
def test_pollution_sensitivities_by_forward_and_reverse_mode_agree(method):
    """d y(60) / d k (20 x 25) by jacfwd and by jacrev (the discrete adjoint through the checkpointed
    loop and the Newton solves' custom_root), and one column against central differences."""

    def final(k):
        return solve_ivp(pollution, (0.0, 60.0), arr(Y0), method, args=(k,), rtol=1e-6, atol=1e-12).y[:, -1]

    k = arr(K)
    forward, reverse = to_numpy(pa.jacfwd(final)(k)), to_numpy(pa.jacrev(final)(k))
    scale = np.max(np.abs(forward), axis=1, keepdims=True)
    assert np.max(np.abs(forward - reverse) / scale) < 1e-8
    step = 1e-6 * K[0]
    up, down = np.array(K), np.array(K)
    up[0] += step
    down[0] -= step
    central = (to_numpy(final(arr(up))) - to_numpy(final(arr(down)))) / (2 * step)
    assert np.max(np.abs(central - forward[:, 0])) < 1e-5 * np.max(np.abs(forward[:, 0]))
