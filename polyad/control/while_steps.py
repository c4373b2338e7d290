"""The steps a while loop's rules hand the levels below in place of the user's body and condition
(``polyad.control.while_loop``): the vmapped loop's masked step and condition, the jvp'd loop's step and
primal condition, the backward pass's views of them. Each has the ``Body`` protocol of
``polyad.control.bodies``: ``step(*inputs) -> list``, ``out_avals``, ``where``, ``closures``, ``graph``."""

from polyad.control.bodies import BatchedBody
from polyad.control.closure import abstract_of
from polyad.core.avals import ShapeDtype, ndim_of, shape_of
from polyad.ops.base import reshape, where
from polyad.ops.reductions import any as any_of


class BatchedCond:
    """The vmapped loop's condition: whether any example is still running (their predicates ride in the
    carry's last leaf)."""

    closures = ()
    graph = None
    where = "pa.while_loop"

    def __init__(self, n_carry, active):
        self.n_carry = n_carry
        flags = abstract_of(active)
        self.out_avals = [ShapeDtype((), flags.dtype, flags.device)]

    def __call__(self, *args):
        return [any_of(args[self.n_carry - 1])]


class BatchedStep:
    """The vmapped loop's step: the body on every example, kept where the example's predicate holds;
    then the predicates of the new carry."""

    closures = ()
    graph = None

    def __init__(self, cond, body, n_carry, c_dims, b_dims, size, randomness):
        self.cond, self.body, self.n_carry = cond, body, n_carry
        self.c_dims, self.b_dims, self.size, self.randomness = c_dims, b_dims, size, randomness
        self.out_avals = None  # the carry's: set by the rule
        self.where = body.where
        self.draws_random = getattr(body, "draws_random", False)

    def __call__(self, *args):
        n = self.n_carry
        carry, active = list(args[: n - 1]), args[n - 1]
        c_closure = args[n : n + len(self.c_dims)]
        b_closure = args[n + len(self.c_dims) :]
        new = BatchedBody(self.body, [0] * (n - 1) + list(self.b_dims), self.size, self.randomness)(
            *carry, *b_closure
        )
        kept = [where(along(active, c), c_new, c) for c_new, c in zip(new, carry)]
        pred = BatchedBody(self.cond, [0] * (n - 1) + list(self.c_dims), self.size, self.randomness)(
            *kept, *c_closure
        )[0]
        return [*kept, active & pred]


def along(active, c):
    """The per-example flags ``active`` (shape (batch,)) shaped to broadcast against ``c``."""
    return reshape(active, (shape_of(active)[0],) + (1,) * (ndim_of(c) - 1))


class PrimalCond:
    """The jvp'd loop's condition: the user's condition on the primal carry."""

    closures = ()
    graph = None

    def __init__(self, cond, n_carry, n_tangents):
        self.cond, self.n_carry, self.n_tangents = cond, n_carry, n_tangents
        self.out_avals = cond.out_avals
        self.where = cond.where
        self.draws_random = getattr(cond, "draws_random", False)

    def __call__(self, *args):
        n = self.n_carry
        return self.cond(*args[:n], *args[n + self.n_tangents :])


class JvpWhileStep:
    """The jvp'd loop's body: (carry, carry tangents, closure, closure tangents) -> (carry, tangents)."""

    closures = ()
    graph = None

    def __init__(self, inner, n_carry, n_ct, n_b, n_bt):
        self.inner, self.sizes = inner, (n_carry, n_ct, n_b, n_bt)
        self.out_avals = inner.out_avals
        self.where = inner.where
        self.draws_random = getattr(inner, "draws_random", False)

    def __call__(self, *args):
        n_carry, n_ct, n_b, n_bt = self.sizes
        carry, ct = args[:n_carry], args[n_carry : n_carry + n_ct]
        closure = args[n_carry + n_ct : n_carry + n_ct + n_b]
        closure_t = args[n_carry + n_ct + n_b :]
        return self.inner(*carry, *closure, *ct, *closure_t)


class AsScanBody:
    """The while loop's body as a scan's (no xs, no ys): what the reverse sweep's advances run."""

    graph = None
    closures = ()

    def __init__(self, body):
        self.body, self.out_avals, self.where = body, body.out_avals, body.where
        self.draws_random = getattr(body, "draws_random", False)

    def __call__(self, *args):
        return self.body(*args)


class MaskedStep:
    """A vmapped loop's step as its backward pass sees it, every input batched at 0 (carry, condition's
    closure, body's closure): the body on every example, kept where the example's predicate holds (no
    ``cond``: a step that masks already, the body vmapped). A
    finished example is frozen, its predicate false from then on, so the step's derivative there is the
    identity: each example's derivative is that of its own loop, stopped at its own step."""

    closures = ()
    graph = None

    def __init__(self, cond, body, n_carry, n_cond, size, randomness, out_avals):
        self.cond, self.body, self.n_carry, self.n_cond = cond, body, n_carry, n_cond
        self.size, self.randomness, self.out_avals = size, randomness, out_avals
        self.where = body.where
        self.draws_random = getattr(body, "draws_random", False)

    def __call__(self, *args):
        n, m = self.n_carry, self.n_cond
        carry, c_closure, b_closure = args[:n], args[n : n + m], args[n + m :]
        new = BatchedBody(self.body, [0] * (len(args) - m), self.size, self.randomness)(*carry, *b_closure)
        if (
            self.cond is None
        ):  # a step masked already, at a vmap below (it evaluates every example's predicate)
            return new
        pred = BatchedBody(self.cond, [0] * (n + m), self.size, self.randomness)(*carry, *c_closure)[0]
        return [where(along(pred, c), c_new, c) for c_new, c in zip(new, carry)]


class CountedStep:
    """A loop's step with a step counter appended to its carry: (carry, i, closure) -> (carry, i + 1)."""

    closures = ()
    graph = None

    def __init__(self, step, n_carry, counter):
        self.step, self.n_carry = step, n_carry
        self.out_avals = list(step.out_avals) + [abstract_of(counter)]
        self.where = step.where
        self.draws_random = getattr(step, "draws_random", False)

    def __call__(self, *args):
        n = self.n_carry
        return [*self.step(*args[:n], *args[n + 1 :]), args[n] + 1]


class CountCond:
    """``i < count``: a loop that runs exactly as many steps as one that ran before (its ``count``),
    without the user's condition (a vmapped loop's masked step has none)."""

    closures = ()
    graph = None
    where = "pa.while_loop"

    def __init__(self, n_carry, flag):
        self.n_carry = n_carry
        self.out_avals = [abstract_of(flag)]

    def __call__(self, *args):
        return [args[self.n_carry - 1] < args[self.n_carry]]
