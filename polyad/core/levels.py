"""The level stack: one integer level per active transform, pushed and popped in try/finally.

Level 0 is eager evaluation; each transform (grad, jvp, vmap, a capture) pushes an ``Interpreter`` at the
next level for the time it runs. The highest level among an op's arguments handles the op; lower levels
are constants to it (``polyad.core.dispatcher.bind``). The stack is per thread: a transform's values
belong to the thread that runs it.
"""

import threading
from contextlib import contextmanager


class _LevelState(threading.local):
    def __init__(self):
        self.stack = [None]  # stack[level] is the interpreter of that level; level 0 is eager evaluation
        self.no_grad_level = 0  # reverse levels <= this record nothing (pa.no_grad)


_tls = _LevelState()


class Interpreter:
    """Base of the per-transform interpreters (reverse, forward, batching, captures).

    An interpreter owns one level number. ``process(op, args, params)`` receives every op whose highest
    argument level is its own; arguments of lower levels are constants to it.
    """

    # a transform runs a higher-order op's body on its own tensors unless the op brings a rule of the
    # transform's kind (``rule_kind``); a capture (graph, eval_shape) records the op as one
    transforms_bodies = True
    rule_kind = None  # the RuleKind this interpreter reads (polyad.core.registry)
    # for messages about values leaving it (polyad.core.tensor): what the transform is called, what its
    # tensors carry, and a hint of the fix
    transform = "a polyad transform"
    carries = "transform data"
    exit_hint = ""
    differentiates = False  # whether its tensors carry derivatives (grad, jvp)

    def __init__(self, level):
        self.level = level
        self.active = True
        self.owner = threading.get_ident()  # the thread running the transform: no other may use its tensors
        self.numbers = None  # ids of the Python numbers it handed out (polyad.core.tensor)
        self.on_close = []  # called with the interpreter when its level is popped

    def process(self, op, args, params):
        raise NotImplementedError

    def close(self):
        """Called once when the level is popped (after ``active`` turns False)."""


@contextmanager
def new_level(cls, *args):
    """Push an interpreter of class ``cls`` at the next level; pop it on exit, even on error."""
    stack = _tls.stack
    interp = cls(len(stack), *args)
    stack.append(interp)
    try:
        yield interp
    finally:
        interp.active = False
        interp.owner = None
        interp.close()
        for callback in interp.on_close:
            callback(interp)
        # restore exactly: anything pushed above us by a failing inner transform goes too
        del stack[interp.level :]


def current_level():
    """The number of the innermost active level (0 when no transform is active)."""
    return len(_tls.stack) - 1


def active_interpreters():
    """The active interpreters, innermost last."""
    return _tls.stack[1:]


def capture_below(level=None):
    """Whether a capture (an interpreter that records a higher-order op as one node rather than running
    its body: ``pa.jit``'s trace, ``make_graph``) is active below ``level``: what such a capture holds
    must be ops, never a Python closure. Interpreters ask it for their rules (``RuleContext.captured``).

    Args:
        level: a level number; None: at any active level.

    Returns:
        bool.

    Example:
        >>> import polyad as pa
        >>> seen = []
        >>> _ = pa.grad(lambda x: (seen.append(capture_below()), pa.xp.sum(x))[1])(pa.xp.ones(2))
        >>> capture_below(), seen  # no capture outside, nor under grad alone
        (False, [False])
    """
    return any(not interp.transforms_bodies for interp in _tls.stack[1:level])


def transform_active():
    """Whether any transform level is active in this thread."""
    return len(_tls.stack) > 1


def no_grad_level():
    """The highest reverse level that records nothing (``pa.no_grad``), 0 when every level records."""
    return _tls.no_grad_level


@contextmanager
def recording_off_up_to(level):
    """Inside the block, reverse levels up to ``level`` record nothing (``pa.no_grad`` passes the current
    level, ``pa.enable_grad`` 0); the previous setting comes back on exit, even on error."""
    previous = _tls.no_grad_level
    _tls.no_grad_level = level
    try:
        yield
    finally:
        _tls.no_grad_level = previous
