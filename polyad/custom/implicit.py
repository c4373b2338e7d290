"""Solvers differentiated at their solution: ``custom_root`` and ``custom_linear_solve``, with JAX's
``lax`` signatures and semantics.

Each call is one op (``ROOT``, ``LINEAR_SOLVE``) whose kernel runs the user's ``solve`` on plain arrays,
outside every transform: nothing of its iterations is recorded, so the derivative costs the same memory
and time whatever the number of iterations. The derivatives come from the implicit function theorem and
are written as polyad ops, so they differentiate again (``hessian`` through a root):

- ``custom_linear_solve``: ``x = A(c)^{-1} b``, where ``A(c) = matvec`` closes over values ``c``. Its
  JVP is ``A^{-1} (db - dA x)``, the same op on a new right-hand side; its VJP solves the transposed
  system ``A^T l = g`` (the op again, with ``transpose_solve`` and the transpose of ``matvec``, which
  reverse mode gives) and returns ``l`` for ``b`` and ``-(d(A x)/dc)^T l`` for ``c``.
- ``custom_root``: ``f(x*, c) = 0``. Its JVP is the linear solve ``(df/dx) dx = -(df/dc) dc`` (the
  ``LINEAR_SOLVE`` op with ``tangent_solve`` for both directions); its VJP is the transposed one.

Values ``f`` and ``matvec`` close over are the differentiated inputs (found by tracing them once,
``polyad.control.closure``); ``solve`` and ``tangent_solve`` are not differentiated (JAX's
``stop_gradient`` on them), and a ``solve`` that closes over a traced value of its own is refused.
vmap hands the solve the batch; a solve that needs one example's values (SciPy's) runs once per example.
"""

import math

import optree

import polyad.xp as xp
from polyad.backends.host import np
from polyad.control.bodies import each_example, with_batch_at
from polyad.control.closure import refuse_pre_dispatch_capture, substituted, trace, unaliased
from polyad.control.loops import as_array, check_carry, func_name
from polyad.core import Op, Tensor, bind, new_level, plain, transform_active
from polyad.core.avals import ShapeDtype, dtype_name, is_floating, shape_of
from polyad.custom.derivatives import batch_front, cell_tensors
from polyad.ops.base import expand_dims, move_to_front, take_index
from polyad.ops.fills import zeros_like
from polyad.transforms.batching import BatchedTensor, BatchInterpreter
from polyad.transforms.forward import DualTensor, ForwardInterpreter
from polyad.transforms.reverse import ReverseInterpreter
from polyad.transforms.sparsity import SPARSITY
from polyad.transforms.sparsity_rules import ALL


class ImplicitError(TypeError):
    """A solver's function or output polyad cannot differentiate at the solution (a solve closing over
    a traced value, an output of another structure or shape than its input, no transpose solve)."""


class SolverNotConvergedError(RuntimeError):
    """A derivative was asked of a solver's result that is not a solution (the solver did not converge)."""


# ------------------------------------------------------------------------------ functions of explicit values


def explicit(fn, example_tree, example_flat, where, names=None):
    """``(call, closures, out_tree)``: ``call(flat_in, values)`` runs ``fn`` (a function of one pytree of
    the structure ``example_tree``) on the flat inputs with its closed-over tensors ``closures`` standing
    for ``values``, and returns its flat output. The closure comes from tracing ``fn`` once; a function
    that cannot be traced has the tensors of its closure cells. ``names``: ``(function, input)`` as
    ``check_same_shapes`` names them, whose outputs must have the inputs' shapes (checked on the trace,
    else at each call)."""
    out_tree = []

    def flat_fn(*leaves):
        out = fn(optree.tree_unflatten(example_tree, list(leaves)))
        leaves_out, tree = optree.tree_flatten(out, none_is_leaf=False)
        out_tree.append(tree)
        return tuple(as_array(o, where, "its output") for o in leaves_out)

    out_avals = None
    try:
        body = trace(flat_fn, example_flat, where)
        closures, out_avals = body.closures, body.out_avals
    except TypeError:  # needs concrete values: the tensors of its cells are its closure
        closures = tuple(cell_tensors(fn))
        out_tree = []
    if names is not None and out_avals is not None and out_tree and out_tree[0] == example_tree:
        check_same_shapes(out_avals, example_flat, where, *names)

    def call(flat_in, values, then=None):
        if closures:  # no argument may wrap a closed-over object about to stand for another value
            both = unaliased(closures, list(flat_in) + list(values))
            flat_in, values = both[: len(flat_in)], both[len(flat_in) :]
        with substituted(closures, values, where):
            out = fn(optree.tree_unflatten(example_tree, list(flat_in)))
            leaves_out, tree = optree.tree_flatten(out, none_is_leaf=False)
            if not out_tree:
                out_tree.append(tree)
            if tree != out_tree[0]:
                raise ImplicitError(f"{where} returned {tree}; it returned {out_tree[0]} before")
            outs = [as_array(o, where, "its output") for o in leaves_out]
            if names is not None and tree == example_tree:
                check_same_shapes(outs, flat_in, where, *names)
            # a backward pass runs while the closed-over objects still stand for the values it recorded
            return outs if then is None else then(outs)

    return call, tuple(closures), out_tree


def check_same_shapes(outs, ins, where, function, argument):
    """A residual or a matvec maps its argument to an array of the same shape, leaf by leaf (one
    equation per unknown, a square operator): else an ``ImplicitError`` naming both shapes."""
    for k, (o, i) in enumerate(zip(outs, ins)):
        got, want = tuple(shape_of(o)), tuple(shape_of(i))
        if got != want:
            leaf = f" (leaf {k})" if len(ins) > 1 else ""
            why = "one equation per unknown" if function == "f" else "a square operator"
            raise ImplicitError(
                f"{where}: {function} returned shape {got}{leaf} for {argument} of shape {want}; it must "
                f"return an array of its argument's shape ({why})"
            )


def _forward_tangent(call, flat_in, values, tangents_in, tangents_values, then=None):
    """The output tangents of ``call(flat_in, values)`` (a list; zeros for none) in the directions given
    (None: zero), computed at a new jvp level over the lower levels' values; ``then(tangents)`` instead,
    where given (a matvec's ``then``)."""

    def finish(outs):
        result = []
        for o in outs:
            if isinstance(o, Tensor) and o._interp is interp:
                result.append(zeros_like(o._value) if o._aux is None else o._aux)
            else:
                result.append(zeros_like(o))
        return result if then is None else then(result)

    with new_level(ForwardInterpreter) as interp:
        ins = [DualTensor(plain(v), interp, t) for v, t in zip(flat_in, tangents_in)]
        vals = [DualTensor(plain(v), interp, t) for v, t in zip(values, tangents_values)]
        return call(ins, vals, then=finish)


def _pullback(call, flat_in, values, cotangents, wrt_inputs, wrt_values):
    """``(input cotangents, value cotangents)`` of ``call(flat_in, values)`` pulled back from
    ``cotangents`` at a new reverse level (None where none or not asked). The backward pass runs inside
    ``call`` (its ``then``), while the closed-over objects still stand for the values it recorded."""

    def get(ct, leaf):
        return ct.get(leaf._aux) if isinstance(leaf, Tensor) and leaf._interp is interp else None

    def backward(outs):
        seeds = {}
        for o, g in zip(outs, cotangents):
            if isinstance(o, Tensor) and o._interp is interp and o._aux is not None and g is not None:
                seeds[o._aux] = g if o._aux not in seeds else seeds[o._aux] + g
        ct = interp.backward(seeds, consume=True) if seeds else {}
        return [get(ct, v) for v in ins], [get(ct, v) for v in vals]

    with new_level(ReverseInterpreter) as interp:
        # what is not differentiated is a constant of this level, not a plain array: a function that
        # fills a buffer (``r = np.zeros_like(x); r[0] = x[0] - a``) then makes it at this level, so the
        # values of this level written into it keep their derivatives
        ins = [
            interp.new_leaf(plain(v)) if wrt_inputs and is_floating(v) else _constant(interp, v)
            for v in flat_in
        ]
        vals = [
            interp.new_leaf(plain(v)) if wrt_values and _float(v) else _constant(interp, v) for v in values
        ]
        return call(ins, vals, then=backward)


def _constant(interp, v):
    v = plain(v)
    return interp.constant(v) if hasattr(v, "shape") and hasattr(v, "dtype") else v


def _like(v, ref):
    """A solver's argument as an array: a Python number (``g(1.0)``) becomes one of ``ref``'s shape."""
    if isinstance(v, bool | int | float | complex):
        return zeros_like(ref) + v
    return v


def _float(v):
    return hasattr(v, "dtype") and hasattr(v, "shape") and is_floating(v)


def _solution(problem, out, ref, ref_name, keep_aux):
    """What a problem's ``solve`` returned, flat: the solution's leaves, of the structure, shapes and
    dtypes of ``ref`` (the flat ``b`` or initial guess, named ``ref_name``), then the aux's (``has_aux``;
    dropped unless ``keep_aux``)."""
    aux = []
    if problem.has_aux:
        if not (isinstance(out, tuple | list) and len(out) == 2):
            raise ImplicitError(f"{problem.where}: with has_aux=True, solve must return (x, aux)")
        out, aux_tree = out
        aux, problem.aux_tree = optree.tree_flatten(aux_tree, none_is_leaf=False)
        aux = [as_array(a, problem.where, "solve's aux") for a in aux] if keep_aux else []
    leaves, tree = optree.tree_flatten(out, none_is_leaf=False)
    named = dict(what="solve", of=ref_name, noun="a solution", error=ImplicitError)
    check_carry([], [], problem.where, trees=(tree, problem.tree), **named)
    leaves = [as_array(x, problem.where, "solve's solution") for x in leaves]
    check_carry(leaves, ref, problem.where, **named)
    return leaves + aux


def _no_traced(outs, where, who):
    for o in outs:
        if isinstance(o, Tensor) and o._interp is not None:
            raise ImplicitError(
                f"{where}: {who} returned a value of {o._interp.transform}: it closes over a traced value "
                "that is not the function's; solvers are not differentiated (their result is, at the "
                "solution), so pass what they need through the function they solve"
            )


# ------------------------------------------------------------------------------ linear solves


class LinearProblem:
    """``A x = b``: ``matvec(v_flat, values) -> flat`` (linear in ``v``, ``values`` the closure),
    ``solve(matvec_tree, b_tree)``, ``transpose_solve`` (None: none), ``tree`` the structure of ``b``
    and ``x``; with ``has_aux``, ``solve`` returns ``(x, aux)`` (aux carries no derivative)."""

    def __init__(
        self, matvec, solve, transpose_solve, symmetric, tree, has_aux, where, m, solver_closures=()
    ):
        self.matvec, self.solve, self.transpose_solve = matvec, solve, transpose_solve
        self.symmetric, self.tree, self.has_aux, self.where = symmetric, tree, has_aux, where
        self.m, self.solver_closures = m, tuple(solver_closures)
        self.aux_tree = None
        self.of_root = False  # a root's tangent system (its solution must be finite)
        self.singular = "the operator matvec is singular (or the solve failed on it): check matvec"
        self.keep_aux = has_aux  # a derivative's solve drops the aux its solver still returns
        self._derivative = None

    @property
    def n(self):
        return self.tree.num_leaves

    def run(self, b, values, solver_values):
        """The solve on plain arrays (the kernel), the solvers' closed-over tensors standing for
        ``solver_values``."""

        def mv(v):
            leaves = [_like(x, r) for x, r in zip(optree.tree_leaves(v, none_is_leaf=False), b)]
            return optree.tree_unflatten(self.tree, self.matvec(leaves, values))

        with substituted(self.solver_closures, solver_values, self.where):
            out = self.solve(mv, optree.tree_unflatten(self.tree, list(b)))
        return _solution(self, out, b, "b", self.keep_aux)

    def transposed(self):
        """The problem ``A^T l = g``: the transpose of ``matvec`` (reverse mode of it) and
        ``transpose_solve``; itself when ``symmetric``."""
        if self.symmetric:
            return self
        if self.transpose_solve is None:
            raise ImplicitError(
                f"{self.where}: reverse mode needs the transposed solve; give transpose_solve= (or "
                "symmetric=True for a symmetric operator)"
            )
        matvec = self.matvec

        def vecmat(w, values, then=None):
            # A is linear: its transpose is its pullback at any point (zeros)
            cts, _ = _pullback(matvec, [zeros_like(x) for x in w], values, list(w), True, False)
            out = [zeros_like(x) if c is None else c for c, x in zip(cts, w)]
            return out if then is None else then(out)

        problem = LinearProblem(vecmat, self.transpose_solve, self.solve, False, self.tree, self.has_aux,
                                self.where, self.m, self.solver_closures)  # fmt: skip
        problem.keep_aux, problem.of_root, problem.singular = self.keep_aux, self.of_root, self.singular
        return problem

    def without_aux(self):
        """The problem a derivative solves (a tangent or adjoint system): no aux among its outputs, and
        each solver's ``derivative`` attribute in its place where it has one (``polyad.sparse.linalg``'s
        solvers check there that the primal solve converged)."""
        if self._derivative is None:
            solve, transpose = (getattr(f, "derivative", f) for f in (self.solve, self.transpose_solve))
            problem = LinearProblem(self.matvec, solve, transpose, self.symmetric, self.tree, self.has_aux,
                                    self.where, self.m, self.solver_closures)  # fmt: skip
            problem.keep_aux, problem.of_root, problem.singular = False, self.of_root, self.singular
            problem._derivative = problem
            self._derivative = problem
        return self._derivative


def _solve_kernel(xp_, *args, problem):
    """The kernel of both solve ops (a linear solve, a root): the problem's own solve on plain arrays.
    A root's residual is judged at the result (``RootProblem.judge``); a root's tangent solve that
    fails on a singular Jacobian says so (``singular_message``)."""
    n, m = problem.n, problem.m
    unknowns, values = list(args[:n]), list(args[n : n + m])
    root = _innermost(problem)
    try:
        out = problem.run(unknowns, values, list(args[n + m :]))
    except np.linalg.LinAlgError as err:
        if not isinstance(root, LinearProblem):
            raise
        raise type(err)(f"{root.where}: {err}; {root.singular}") from err
    _no_traced(out, problem.where, "solve")
    out = tuple(plain(o) for o in out)  # arrays made inside a transform come back as FreshTensors
    if isinstance(root, RootProblem) and root.residual_rtol != math.inf:
        root.judge(_max_abs(problem.f(unknowns, values)), _max_abs(problem.f(list(out[:n]), values)))
    elif isinstance(root, LinearProblem) and root.of_root and _max_abs(unknowns) < math.inf:
        if not _max_abs(out[:n]) < math.inf:  # finite right-hand sides, a non-finite solution
            raise np.linalg.LinAlgError(f"{root.where} returned non-finite values; {root.singular}")
    return out


def _innermost(problem):
    while isinstance(problem, BatchedProblem):
        problem = problem.inner
    return problem


def _max_abs(arrays):
    """The largest magnitude among plain ``arrays`` as a float (nan if any is nan; 0 for none)."""
    worst = 0.0
    for a in arrays:
        a = plain(a)
        if math.prod(shape_of(a)):
            v = float(xp.max(xp.abs(a)))
            worst = v if v != v or v > worst else worst
            if v != v:
                return v
    return worst


def _ls_abstract(xp_, *avals, problem):
    n = problem.n
    if problem.keep_aux:
        raise TypeError(f"{problem.where}: has_aux=True outputs have no abstract evaluation")
    return tuple(ShapeDtype(tuple(a.shape), a.dtype, getattr(a, "device", None)) for a in avals[:n])


def _ls_jvp(tangents, out, *args, problem):
    n, m = problem.n, problem.m
    x, values, solver_values = list(out[:n]), list(args[n : n + m]), list(args[n + m :])
    tb, tv = tangents[:n], tangents[n : n + m]  # the solvers' own values carry no derivative
    n_aux = len(out) - n
    if all(t is None for t in tangents[: n + m]):
        return (None,) * len(out)
    rhs = [zeros_like(b) if t is None else t for b, t in zip(args[:n], tb)]
    if any(t is not None for t in tv):  # - dA x
        da_x = _forward_tangent(problem.matvec, x, values, [None] * n, list(tv))
        rhs = [r - d for r, d in zip(rhs, da_x)]
    tx = bind(LINEAR_SOLVE, *rhs, *values, *solver_values, problem=problem.without_aux())
    return tuple(tx) + (None,) * n_aux


def _ls_vjp(g, out, *args, problem):
    n, m = problem.n, problem.m
    x, values, solver_values = list(out[:n]), list(args[n : n + m]), list(args[n + m :])
    lam = list(
        bind(LINEAR_SOLVE, *g[:n], *values, *solver_values, problem=problem.without_aux().transposed())
    )

    def value_cotangents():
        _, cts = _pullback(problem.matvec, x, values, lam, False, True)
        return [None if c is None else -c for c in cts]

    cache = []

    def lazy(k):
        def get():
            if not cache:
                cache.append(value_cotangents())
            return cache[0][k]

        return get

    return tuple(lam) + tuple(lazy(k) for k in range(m)) + (None,) * len(solver_values)


# ------------------------------------------------------------------------------ vmap


class BatchedProblem:
    """A ``LinearProblem`` or ``RootProblem`` vmapped: the unknowns (``b``/``x0``, ``x``) with the batch
    at 0, the closure values at ``dims`` (0 or None); each function runs the problem's at a new vmap
    level, so the user's solve, matvec and tangent_solve see one example's values."""

    def __init__(self, inner, dims, size, randomness):
        self.inner, self.dims, self.size, self.randomness = inner, tuple(dims), size, randomness
        self.n, self.m, self.tree, self.where = inner.n, inner.m, inner.tree, inner.where
        self.has_aux, self.symmetric = inner.has_aux, getattr(inner, "symmetric", False)
        self.keep_aux = getattr(inner, "keep_aux", inner.has_aux)

    aux_tree = property(lambda self: self.inner.aux_tree)

    def _wrap(self, interp, values, dims):
        return [v if d is None else BatchedTensor(plain(v), interp, d) for v, d in zip(values, dims)]

    def _run_function(self, fn, unknowns, values, then):
        with new_level(BatchInterpreter, self.size, self.randomness) as interp:

            def front(outs):
                outs = [batch_front(o, interp, self.size) for o in outs]
                return outs if then is None else then(outs)

            wrapped = self._wrap(interp, unknowns, [0] * len(unknowns))
            return fn(wrapped, self._wrap(interp, values, self.dims[: len(values)]), then=front)

    def matvec(self, v, values, then=None):
        return self._run_function(self.inner.matvec, v, values, then)

    def f(self, x, values, then=None):
        return self._run_function(self.inner.f, x, values, then)

    def run(self, unknowns, values, solver_values):
        try:
            with new_level(BatchInterpreter, self.size, self.randomness) as interp:
                outs = self.inner.run(
                    self._wrap(interp, unknowns, [0] * len(unknowns)),
                    self._wrap(interp, values, self.dims[: len(values)]),
                    self._wrap(interp, solver_values, self.dims[len(values) :]),
                )
                return [batch_front(o, interp, self.size) for o in outs]
        except TypeError as err:  # a solve of plain values (SciPy's, newton_krylov's) under pa.jit, whose
            if isinstance(err, ImplicitError):  # trace of the batch rule ran no solve to fall back on
                raise  # vmap's per-example loop: that loop is here
        groups, m = (unknowns, values, solver_values), len(values)
        return each_example(self.inner.run, self.size, groups, ((0,) * self.n, self.dims[:m], self.dims[m:]))

    def _like(self, inner, dims=None):
        return BatchedProblem(inner, self.dims if dims is None else dims, self.size, self.randomness)

    def transposed(self):
        return self if self.symmetric else self._like(self.inner.transposed())

    def without_aux(self):
        return self._like(self.inner.without_aux())

    def linearized(self):  # a root's tangent system: its closure values are x (batched at 0), then the root's
        return self._like(self.inner.linearized(), (0,) * self.n + self.dims)


def _batch_rule(op):
    def batch(info, dims, *args, problem):
        n, size = problem.n, info.batch_size
        if size == 1:  # one example (jacfwd of a scalar): the op on it, no batch to run the solver over
            one = [a if d is None else take_index(a, 0, axis=d) for a, d in zip(args, dims)]
            outs = bind(op, *one, problem=problem)
            return tuple(expand_dims(o, axis=0) for o in outs), (0,) * len(outs)
        unknowns = [with_batch_at(a, d, size) for a, d in zip(args[:n], dims[:n])]
        rest = [a if d is None else move_to_front(a, d) for a, d in zip(args[n:], dims[n:])]
        batched = BatchedProblem(problem, [None if d is None else 0 for d in dims[n:]], size, info.randomness)
        try:
            outs = bind(op, *unknowns, *rest, problem=batched)
        except ImplicitError:
            raise
        except TypeError:  # a solve that needs one example's values (SciPy): vmap's per-example loop
            return NotImplemented
        return outs, (0,) * len(outs)

    return batch


LINEAR_SOLVE = Op(
    "custom_linear_solve",
    _solve_kernel,
    multiple_results=True,
    abstract_eval=_ls_abstract,
    jvp=_ls_jvp,
    vjp=_ls_vjp,
    higher_order=None,
)
LINEAR_SOLVE.register_rule("batch", _batch_rule(LINEAR_SOLVE))


def _sparsity_rule(from_unknowns):
    """Every solution element may depend on every element of ``b`` (``from_unknowns``: a linear solve;
    a root's initial guess carries none) and of what the function closes over (a solve couples them:
    conservative, never a missed non-zero); nothing on the solvers' own values; the aux on nothing."""

    def rule(traced, out, *args, problem):
        n, m = problem.n, problem.m
        first = 0 if from_unknowns else n
        deps = tuple(ALL if first <= k < n + m else None for k in range(len(args)))
        return [deps if k < n else (None,) * len(args) for k in range(len(out))]

    return rule


LINEAR_SOLVE.register_rule(SPARSITY, _sparsity_rule(True))


def custom_linear_solve(matvec, b, solve, transpose_solve=None, symmetric=False, has_aux=False):
    """``x`` with ``matvec(x) = b``, computed by ``solve`` and differentiated implicitly, as
    ``jax.lax.custom_linear_solve``.

    Args:
        matvec: the linear operator ``A``, a function of a pytree shaped like ``b``; the values it
            closes over are differentiated (``A`` may depend on parameters).
        b: the right-hand side (a pytree of arrays).
        solve: ``solve(matvec, b) -> x`` (``(x, aux)`` with ``has_aux``): any solver, even one that
            calls SciPy on host values; it runs on plain arrays and is not differentiated.
        transpose_solve: ``transpose_solve(vecmat, b) -> x`` for the adjoint system ``A^T x = b``
            (``A^H`` for complex ``A``: ``vecmat`` is the pullback of ``matvec``, a conjugate transpose in
            polyad's convention), which reverse mode needs (unless ``symmetric``).
        symmetric: ``A`` is its own adjoint (symmetric, Hermitian for complex): reverse mode uses
            ``solve``.
        has_aux: ``solve`` returns ``(x, aux)``; ``aux`` is returned as it is, with no derivative.

    Returns:
        ``x`` (and ``aux``). Its derivatives with respect to ``b`` and what ``matvec`` closes over are
        ``A^{-1} (db - dA x)`` (forward) and the transposed solve (reverse), each one more call of
        ``solve`` or ``transpose_solve``, whatever ``solve`` did inside.

    Example:
        >>> import numpy as np, polyad as pa
        >>> A = np.array([[4.0, 1.0], [1.0, 3.0]])
        >>> def x_of(b):
        ...     return pa.custom_linear_solve(lambda v: A @ v, b, lambda mv, r: np.linalg.solve(A, r),
        ...                                   symmetric=True)
        >>> np.allclose(pa.jacrev(x_of)(np.ones(2)), np.linalg.inv(A))
        True
    """
    where = f"pa.custom_linear_solve({func_name(matvec)})"
    for name, f in (("matvec", matvec), ("solve", solve)):
        if not callable(f):
            raise TypeError(f"{where}: {name} must be callable, got {type(f).__name__}")
    for name, flag in (("symmetric", symmetric), ("has_aux", has_aux)):
        if not isinstance(flag, bool):
            raise TypeError(f"{where}: {name} must be True or False, got {flag!r}")
    if transpose_solve is not None and not callable(transpose_solve):
        raise TypeError(
            f"{where}: transpose_solve must be callable or None, got {type(transpose_solve).__name__}"
        )
    flat, tree = optree.tree_flatten(b, none_is_leaf=False)
    flat = [as_array(v, where, "b") for v in flat]
    if not transform_active():
        refuse_pre_dispatch_capture(where, "a linear solver's iterations")
        names = (where, "matvec", "b")
        problem = LinearProblem(lambda v, c: _plain_matvec(matvec, tree, v, names), solve, transpose_solve,
                                symmetric, tree, has_aux, where, 0)  # fmt: skip
        return _solved_eagerly(problem, flat, problem.matvec)
    call, closures, out_tree = explicit(matvec, tree, flat, f"{where}'s matvec", ("matvec", "b"))
    if out_tree and out_tree[0] != tree:
        raise ImplicitError(f"{where}: matvec returned {out_tree[0]} for b of structure {tree}")
    solver_closures = _solver_closures(solve, transpose_solve)
    problem = LinearProblem(call, solve, transpose_solve, symmetric, tree, has_aux, where, len(closures),
                            solver_closures)  # fmt: skip
    outs = bind(LINEAR_SOLVE, *flat, *closures, *solver_closures, problem=problem)
    return _unflatten(problem, list(outs))


def _solver_closures(*solvers):
    """The tensors of transforms the solvers close over (``solve(matvec, b)`` written with a traced
    ``A``): inputs of the op, standing for their plain values when the kernel runs the solve; they carry
    no derivative (the solution's comes from the function solved)."""
    found = {}
    for s in solvers:
        if s is not None:
            for t in cell_tensors(s):
                found.setdefault(id(t), t)
    return tuple(found.values())


def _solved_eagerly(problem, flat, function):
    """Outside transforms: the solve, then ``function`` (the residual, the matvec) once at its result, so
    that one returning another shape is refused as under a transform (where its trace is checked)."""
    outs = problem.run(flat, [], [])
    function(outs[: problem.n], [])
    return _unflatten(problem, outs)


def _plain_matvec(matvec, tree, v, names):
    """``matvec`` (or a residual) on flat ``v``, outside transforms: its flat output, shapes checked."""
    out, got = optree.tree_flatten(matvec(optree.tree_unflatten(tree, list(v))), none_is_leaf=False)
    if got == tree:
        check_same_shapes(out, v, *names)
    return out


def _unflatten(problem, outs):
    x = optree.tree_unflatten(problem.tree, list(outs[: problem.n]))
    if not problem.has_aux:
        return x
    return x, optree.tree_unflatten(problem.aux_tree, list(outs[problem.n :]))


# ------------------------------------------------------------------------------ roots


class RootProblem:
    """``f(x, values) = 0``: ``f(x_flat, values) -> flat``; ``solve(f_tree, x0_tree)`` (``(x, aux)``
    with ``has_aux``); ``tangent_solve(g, y)`` solves the linearised system ``g(x) = y``."""

    def __init__(
        self, f, solve, tangent_solve, tree, has_aux, where, m, solver_closures=(), residual_rtol=None
    ):
        self.f, self.solve, self.tangent_solve = f, solve, tangent_solve
        self.tree, self.has_aux, self.where = tree, has_aux, where
        self.m, self.solver_closures = m, tuple(solver_closures)
        self.residual_rtol = residual_rtol
        self.eps = 2.220446049250313e-16  # of x's least precise dtype (custom_root sets it)
        self.failure = None  # why the last solve's result is not a root (None: it is)
        self.checked_since = False  # a derivative read ``failure`` since it was recorded
        self.aux_tree = None
        self._linear = None

    def judge(self, start, end):
        """Record whether the solve converged, from the largest residual at ``initial_guess`` (``start``)
        and at its result (``end``): a root when ``end`` is finite and at most ``residual_rtol`` (by
        default ``100 sqrt(eps)``, eps of ``x``'s dtype) times ``max(1, start)``."""
        rtol = self.residual_rtol
        if rtol is None:
            rtol = 100 * math.sqrt(self.eps)
        bound = rtol * max(1.0, start)
        if self.checked_since:  # a new evaluation (a compiled function solves again at every call)
            self.failure, self.checked_since = None, False
        if not end <= bound and self.failure is None:  # vmap's loop: one failing example fails them all
            self.failure = (
                f"max|f(x)| = {end:.3g} at solve's result, above {bound:.3g} (residual_rtol {rtol:.3g} "
                f"times max(1, max|f(initial_guess)|) = max(1, {start:.3g}))"
            )

    def checked(self, tangent_solve):
        """``tangent_solve`` that first refuses a derivative at a result that is not a root."""

        def solve(g, y):
            self.checked_since = True
            if self.failure is not None:
                raise SolverNotConvergedError(
                    f"{self.where}: solve did not converge ({self.failure}); its result is not a root, so "
                    "the implicit derivative at it would be wrong: solve to a tighter tolerance or from a "
                    "better initial_guess (residual_rtol= sets the test; math.inf turns it off)"
                )
            return tangent_solve(g, y)

        return solve

    @property
    def n(self):
        return self.tree.num_leaves

    def run(self, x0, values, solver_values):
        def f_tree(x):
            return optree.tree_unflatten(self.tree, self.f(optree.tree_leaves(x, none_is_leaf=False), values))

        with substituted(self.solver_closures, solver_values, self.where):
            out = self.solve(f_tree, optree.tree_unflatten(self.tree, list(x0)))
        return _solution(self, out, x0, "initial_guess", True)

    def linearized(self):
        """The tangent system's ``LinearProblem``: ``v -> (df/dx) v`` at ``(x, values)``, its closure
        values ``x`` and then ``values``; ``tangent_solve`` solves it and its transpose, as in JAX."""
        if self._linear is None:
            f, n = self.f, self.n

            def dfdx(v, xv, then=None):
                return _forward_tangent(f, list(xv[:n]), list(xv[n:]), list(v), [None] * (len(xv) - n), then)

            where = f"{self.where}'s tangent_solve"
            solver = self.checked(self.tangent_solve)
            self._linear = LinearProblem(
                dfdx, solver, solver, False, self.tree, False, where, n + self.m, self.solver_closures
            )
            self._linear.of_root = True
            self._linear.singular = (
                "the Jacobian of the residual f at the solution is singular, so the root's implicit "
                "derivative does not exist there (a multiple root, or f not depending on every unknown): "
                "differentiate a problem whose root is simple"
            )
        return self._linear


def _root_abstract(xp_, *avals, problem):
    if problem.has_aux:
        raise TypeError(f"{problem.where}: has_aux=True outputs have no abstract evaluation")
    return tuple(ShapeDtype(tuple(a.shape), a.dtype, getattr(a, "device", None)) for a in avals[: problem.n])


def _root_jvp(tangents, out, *args, problem):
    n, m = problem.n, problem.m
    tv = tangents[n : n + m]
    if all(t is None for t in tv):  # the initial guess and the solvers' values carry no derivative
        return (None,) * len(out)
    x, values, solver_values = list(out[:n]), list(args[n : n + m]), list(args[n + m :])
    df = _forward_tangent(problem.f, x, values, [None] * n, list(tv))
    tx = bind(LINEAR_SOLVE, *[-d for d in df], *x, *values, *solver_values, problem=problem.linearized())
    return tuple(tx) + (None,) * (len(out) - n)


def _root_vjp(g, out, *args, problem):
    n, m = problem.n, problem.m
    x, values, solver_values = list(out[:n]), list(args[n : n + m]), list(args[n + m :])
    lam = list(bind(LINEAR_SOLVE, *g[:n], *x, *values, *solver_values,
                    problem=problem.linearized().transposed()))  # fmt: skip
    _, cts = _pullback(problem.f, x, values, lam, False, True)
    return (None,) * n + tuple(None if c is None else -c for c in cts) + (None,) * len(solver_values)


ROOT = Op(
    "custom_root",
    _solve_kernel,
    multiple_results=True,
    abstract_eval=_root_abstract,
    jvp=_root_jvp,
    vjp=_root_vjp,
    higher_order=None,
)
ROOT.register_rule("batch", _batch_rule(ROOT))
ROOT.register_rule(SPARSITY, _sparsity_rule(False))


def custom_root(f, initial_guess, solve, tangent_solve, has_aux=False, *, residual_rtol=None):
    """A root of ``f`` found by ``solve`` and differentiated implicitly, as ``jax.lax.custom_root``.

    Args:
        f: the residual, a function of a pytree shaped like ``initial_guess`` returning one of the same
            structure; the values it closes over are differentiated (the problem's parameters).
        initial_guess: where ``solve`` starts (a pytree of arrays); it carries no derivative.
        solve: ``solve(f, initial_guess) -> x`` (``(x, aux)`` with ``has_aux``): any solver, even
            SciPy's on host values; it runs on plain arrays and is not differentiated.
        tangent_solve: ``tangent_solve(g, y) -> x`` solving ``g(x) = y`` for a linear ``g`` (the
            Jacobian of ``f`` at the root, or its transpose in reverse mode); for a scalar root,
            ``lambda g, y: y / g(1.0)``.
        has_aux: ``solve`` returns ``(x, aux)``; ``aux`` is returned as it is, with no derivative.
        residual_rtol: how convergence is judged (under a transform, where a derivative may be asked):
            ``solve``'s result ``x`` is a root when every element of ``f(x)`` is finite and
            ``max|f(x)| <= residual_rtol * max(1, max|f(initial_guess)|)``; None: ``100 sqrt(eps)``
            (eps of ``x``'s dtype: 1.5e-6 in float64, 3.5e-2 in float32); ``math.inf``: not judged
            (a caller that judges convergence itself). A result that is not a root is returned as it
            is, but every derivative of it raises ``SolverNotConvergedError``.

    Returns:
        The root (and ``aux``). Its derivative by the implicit function theorem,
        ``dx = -(df/dx)^{-1} (df/dc) dc``, costs one ``tangent_solve`` whatever ``solve`` did, and is
        written as polyad ops: it differentiates again (hessian through a root). ``f`` must return
        arrays of ``x``'s shapes (else ``ImplicitError``); a ``tangent_solve`` that fails on a singular
        Jacobian (NumPy's ``LinAlgError``, or a non-finite solution) says that the root is not simple.

    Example:
        >>> import numpy as np, polyad as pa
        >>> def newton(f, x):
        ...     for _ in range(50):
        ...         x = x - f(x) / pa.jacfwd(f)(x)
        ...     return x
        >>> def cube_root(a):
        ...     return pa.custom_root(lambda x: x**3 - a, np.float64(1.0), newton, lambda g, y: y / g(1.0))
        >>> round(float(pa.grad(cube_root)(np.float64(8.0))), 12)  # d a^(1/3) / da = 1 / (3 a^(2/3))
        0.083333333333
    """
    where = f"pa.custom_root({func_name(f)})"
    for name, fn in (("f", f), ("solve", solve), ("tangent_solve", tangent_solve)):
        if not callable(fn):
            raise TypeError(f"{where}: {name} must be callable, got {type(fn).__name__}")
    if not isinstance(has_aux, bool):
        raise TypeError(f"{where}: has_aux must be True or False, got {has_aux!r}")
    if residual_rtol is not None and (
        isinstance(residual_rtol, bool) or not isinstance(residual_rtol, int | float) or not residual_rtol > 0
    ):
        raise ValueError(f"{where}: residual_rtol must be a positive number or None, got {residual_rtol!r}")
    flat, tree = optree.tree_flatten(initial_guess, none_is_leaf=False)
    flat = [as_array(v, where, "initial_guess") for v in flat]
    if not transform_active():
        refuse_pre_dispatch_capture(where, "a root finder's iterations")
        names = (where, "f", "initial_guess")
        problem = RootProblem(lambda x, c: _plain_matvec(f, tree, x, names), solve, tangent_solve, tree,
                              has_aux, where, 0)  # fmt: skip
        return _solved_eagerly(problem, flat, problem.f)
    call, closures, out_tree = explicit(f, tree, flat, where, ("f", "initial_guess"))
    if out_tree and out_tree[0] != tree:
        raise ImplicitError(f"{where}: f returned {out_tree[0]} for initial_guess of structure {tree}")
    solver_closures = _solver_closures(solve, tangent_solve)
    problem = RootProblem(call, solve, tangent_solve, tree, has_aux, where, len(closures), solver_closures,
                          residual_rtol)  # fmt: skip
    if any(dtype_name(v.dtype) in ("float32", "complex64", "float16") for v in flat):
        problem.eps = 1.1920928955078125e-07
    outs = bind(ROOT, *flat, *closures, *solver_closures, problem=problem)
    return _unflatten(problem, list(outs))


__all__ = [
    "ImplicitError", "LINEAR_SOLVE", "ROOT", "SolverNotConvergedError", "custom_linear_solve", "custom_root",
]  # fmt: skip
