"""CUDA graphs through CuPy's stream capture: the contract's ``graph_capture`` field for the CuPy backend.

``capture(record)`` runs ``record`` (a Python function launching CuPy kernels on arrays allocated before)
once for real on a stream of its own, then again while the stream captures, and returns a ``Replay``
whose ``launch()`` replays the captured kernels on the current stream. Not verified on a GPU.

Why it is built so (facts from CuPy's and CUDA's documentation):
- capture must be on a stream that is not the legacy default stream: a non-blocking stream of our own;
- CuPy's ``begin_capture`` defaults to the relaxed mode, in which a ``cudaMalloc`` of the memory pool
  during capture is allowed; but CuPy's pool knows nothing of graphs: a block freed during capture goes
  back to the pool and may be handed to another array while the graph still writes it at each replay.
  So ``record`` allocates from a memory pool private to the replay (``using_allocator``), kept alive with
  it: freed blocks stay in that pool, which nothing else uses. The warm-up run fills it with the blocks
  the capture then takes (same sizes, same order: no allocation in the capture), and compiles and loads
  the kernels, which the capture could not do without a driver that allows module loads while capturing;
- CuPy's pool keeps its free blocks per stream, so the warm-up runs on the capture stream;
- the host waits for the current stream before the warm-up (the inputs were written there) and for the
  capture stream after it (the caller then writes the inputs on the current stream): once per capture;
- a failure inside the capture (a kernel that synchronises with the host, an allocation refused) ends
  the capture in ``finally`` and is raised; the stream and allocator contexts are left on the way out.
"""


class Replay:
    """A captured CUDA graph with what it needs alive: the memory pool it allocated from and its stream."""

    def __init__(self, graph, stream, pool):
        self.graph, self.stream, self.pool = graph, stream, pool

    def launch(self):
        import cupy

        self.graph.launch(stream=cupy.cuda.get_current_stream())


def capture(record):
    """``record`` captured into a CUDA graph: a ``Replay``. ``record`` may have run once for real."""
    import cupy

    stream = cupy.cuda.Stream(non_blocking=True)
    pool = cupy.cuda.MemoryPool()
    cupy.cuda.get_current_stream().synchronize()
    with cupy.cuda.using_allocator(pool.malloc), stream:
        record()  # warm-up: kernels compiled and loaded, the private pool filled
        stream.synchronize()
        stream.begin_capture()
        try:
            record()
        except BaseException:
            try:
                stream.end_capture()
            except Exception:  # the capture was invalidated by the failure: its own error is the one to see
                pass
            raise
        graph = stream.end_capture()
    return Replay(graph, stream, pool)
