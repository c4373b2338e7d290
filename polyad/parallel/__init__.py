"""Chunked and distributed execution of vmap and the Jacobians: ``plan.py`` (``ChunkPlan``, chunks sized
from a memory budget and joined into one result) and ``cluster.py`` (the chunks as tasks on a Dask
cluster: ``distributed``, the only module that imports Dask's ``distributed`` client)."""
