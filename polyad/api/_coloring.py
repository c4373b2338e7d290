"""Greedy colouring of a sparse Jacobian's columns (or rows) for compressed evaluation.

Two columns may share a colour when no row has a non-zero in both (they are not neighbours in the
column-intersection graph, ``P^T P``): one Jacobian-vector product with the sum of the basis vectors of a
colour then gives every non-zero of those columns, each alone in its row among them. The greedy algorithm
visits the columns in an order and gives each the smallest colour none of its neighbours has.

A Hessian is symmetric, and a **star colouring** of its adjacency graph (rows and columns are vertices,
off-diagonal non-zeros edges) uses that: neighbours differ in colour, and every path on four vertices
has at least three colours. Then each non-zero ``H[i, j]`` is alone among its colour in row ``i`` (read
from the product with ``j``'s colour at row ``i``) or ``H[j, i]`` is in row ``j``: direct recovery, no
substitution. An arrowhead (one dense row and column) needs 2 colours this way, where the columns'
distance-1 colouring needs one per column.

The order matters. ``"dsatur"`` (Brélaz's DSATUR: next, the vertex whose neighbours already show the
most distinct colours) is the default: on the 2-D five-point stencil it finds 5 colours, the optimum,
where the fixed orders ``"largest_first"`` and ``"natural"`` find 6 or 7 (banded matrices: the band width,
by every order). It costs a few times more than a fixed order, once per pattern.
"""

import heapq

from polyad.backends.host import np

ORDERS = ("dsatur", "largest_first", "natural")
# colourings of a symmetric pattern (a Hessian's): "star", or "auto": star or distance-1 ("dsatur"),
# whichever has fewer colours
SYMMETRIC = ("star", "auto")


def intersection_graph(pattern):
    """The column-intersection graph of a CSR/CSC pattern as ``(indptr, indices)`` adjacency lists:
    columns ``j`` and ``k`` are neighbours when a row has a non-zero in both (``j != k``)."""
    p = pattern.tocsr().astype(np.float32)
    g = (p.T @ p).tocsr()
    g.setdiag(0)
    g.eliminate_zeros()
    return g.indptr, g.indices


def _dsatur(neighbours, ptr, degree):
    """DSATUR (Brélaz): colour next the vertex with the most distinct colours among its neighbours (ties:
    the larger degree, then the smaller number), with the smallest colour none of them has. Vertices
    wait in one heap per saturation; a vertex whose saturation grew is pushed again (the old entry is
    skipped when popped). Colours seen are bits of a Python int."""
    n = len(degree)
    key = [(-d, v) for v, d in enumerate(degree)]
    colour, seen, saturation = [-1] * n, [0] * n, [0] * n
    heaps = [sorted(key)]  # heaps[s]: the vertices of saturation s (a sorted list is a heap)
    top = done = 0
    while done < n:
        heap = heaps[top]
        if not heap:
            top -= 1
            continue
        v = heapq.heappop(heap)[1]
        if colour[v] >= 0 or saturation[v] != top:
            continue  # coloured already, or an outdated entry
        taken, c = seen[v], 0
        while taken >> c & 1:
            c += 1
        colour[v] = c
        done += 1
        bit = 1 << c
        for w in neighbours[ptr[v] : ptr[v + 1]]:
            if colour[w] < 0 and not seen[w] & bit:
                seen[w] |= bit
                s = saturation[w] = saturation[w] + 1
                if s == len(heaps):
                    heaps.append([])
                heapq.heappush(heaps[s], key[w])
                top = max(top, s)
    return colour


def greedy(indptr, indices, order="dsatur"):
    """Colours ``0, 1, ...`` of a graph's vertices such that neighbours never share one.

    Args:
        indptr, indices: the adjacency lists (CSR) of an undirected graph without self-loops.
        order: "dsatur" (the vertex with the most distinct colours among its neighbours next), or a
            fixed order: "largest_first" (decreasing degree) or "natural"; each vertex gets the smallest
            colour none of its coloured neighbours has.

    Returns:
        An int64 NumPy array with each vertex's colour.

    Example:
        >>> from polyad.api._coloring import greedy
        >>> import numpy as np
        >>> greedy(np.array([0, 1, 3, 4]), np.array([1, 0, 2, 1])).tolist()  # the path 0 - 1 - 2
        [1, 0, 1]
    """
    if order not in ORDERS:
        raise ValueError(f"coloring must be one of {', '.join(map(repr, ORDERS))}, got {order!r}")
    n = len(indptr) - 1
    neighbours, ptr = indices.tolist(), indptr.tolist()
    degree = np.diff(indptr)
    if order == "dsatur":
        return np.asarray(_dsatur(neighbours, ptr, degree.tolist()), dtype=np.int64)
    sequence = range(n) if order == "natural" else np.argsort(-degree, kind="stable").tolist()
    colour = [-1] * n
    for v in sequence:
        taken = {colour[w] for w in neighbours[ptr[v] : ptr[v + 1]]}
        c = 0
        while c in taken:
            c += 1
        colour[v] = c
    return np.asarray(colour, dtype=np.int64)


def color_columns(pattern, order="dsatur"):
    """A colouring of ``pattern``'s columns in which no two columns of a colour share a row."""
    return greedy(*intersection_graph(pattern), order)


def is_valid(pattern, colors):
    """Whether no row of ``pattern`` has non-zeros in two columns of one colour."""
    p = pattern.tocoo()
    pairs = np.unique(np.stack([p.row, colors[p.col]]), axis=1)
    return pairs.shape[1] == len(np.unique(np.stack([p.row, p.col]), axis=1).T)


def star_coloring(pattern):
    """A star colouring of a symmetric pattern's adjacency graph (its off-diagonal non-zeros), greedy in
    decreasing degree.

    Each vertex ``v`` gets the smallest colour not forbidden by: a coloured neighbour ``w`` (distance 1);
    a coloured ``x`` two steps away through an uncoloured ``w`` (``w`` could later close a two-coloured
    path ``v - w - x`` plus one); a coloured ``x`` two steps away through a coloured ``w`` when ``x`` has
    another neighbour of ``w``'s colour (``v - w - x - y`` would use two colours). Two neighbours of an
    uncoloured vertex never share a colour (the second rule, when the later of them was coloured), which
    covers the paths with ``v`` inside.

    The colours each rule forbids through ``w`` are kept per vertex and updated as vertices are coloured
    (bit sets), so a vertex costs its degree, not the sum of its neighbours' degrees: an arrowhead's hub
    is not walked once per vertex. Time O(non-zeros x colours): an arrowhead with n = 10^5 in a fraction
    of a second.

    Args:
        pattern: a square, symmetric SciPy sparse pattern.

    Returns:
        An int64 NumPy array with each vertex's colour.

    Example:
        >>> import numpy as np, scipy.sparse as sp
        >>> from polyad.api._coloring import star_coloring
        >>> arrow = np.eye(5, dtype=bool); arrow[0] = arrow[:, 0] = True
        >>> star_coloring(sp.csr_array(arrow)).tolist()
        [0, 1, 1, 1, 1]
    """
    g = _adjacency(pattern)
    ptr, neighbours = g.indptr.tolist(), g.indices.tolist()
    n = g.shape[0]
    colour = [-1] * n
    # colours as bits of Python ints: once[x], twice[x]: the colours at least one, at least two of x's
    # coloured neighbours have; bad[w] (w coloured): the colours of w's coloured neighbours x that have
    # another neighbour of w's colour (the third rule through w)
    once, twice, bad = [0] * n, [0] * n, [0] * n
    for v in np.argsort(-np.diff(g.indptr), kind="stable").tolist():
        forbidden = 0
        for w in neighbours[ptr[v] : ptr[v + 1]]:
            cw = colour[w]
            forbidden |= (1 << cw) | bad[w] if cw >= 0 else once[w]
        c = (~forbidden & (forbidden + 1)).bit_length() - 1  # the lowest colour not forbidden
        colour[v], bit = c, 1 << c
        for x in neighbours[ptr[v] : ptr[v + 1]]:
            cx = colour[x]
            if not once[x] & bit:
                once[x] |= bit
            elif not twice[x] & bit:  # once per vertex and colour: a hub is walked a few times in all
                twice[x] |= bit
                if cx >= 0:  # x now counts for each of its neighbours of colour c
                    for w in neighbours[ptr[x] : ptr[x + 1]]:
                        if colour[w] == c:
                            bad[w] |= 1 << cx
            if cx >= 0:
                if twice[v] & (1 << cx):  # v counts for x
                    bad[x] |= bit
                if twice[x] & bit:  # x counts for v
                    bad[v] |= 1 << cx
    return np.asarray(colour, dtype=np.int64)


def symmetric_colors(pattern, coloring):
    """The colours of a symmetric pattern's columns for ``coloring`` in ``SYMMETRIC``: "star", or "auto"
    (the star colouring where it has fewer colours than the distance-1 DSATUR one, else that one)."""
    star = star_coloring(pattern)
    if coloring == "star":
        return star
    # a distance-1 colouring needs at least a row's count of colours: where that is more than the
    # star colouring, skip it (an arrowhead's column-intersection graph is dense: n^2 entries)
    if int(np.diff(pattern.tocsr().indptr).max(initial=0)) > star.max(initial=-1) + 1:
        return star
    plain = color_columns(pattern, "dsatur")
    return star if star.max(initial=-1) < plain.max(initial=-1) else plain


def is_star_coloring(pattern, colors):
    """Whether ``colors`` is a star colouring of the symmetric pattern's adjacency graph: no two neighbours
    share a colour, and no path on four vertices ``v - w - x - y`` has two colours. Such a path is seen
    at its middle edge: ``w`` has another neighbour of ``x``'s colour and ``x`` another of ``w``'s.
    Vectorised (NumPy): one pass over the non-zeros.

    Example:
        >>> import numpy as np, scipy.sparse as sp
        >>> from polyad.api._coloring import is_star_coloring
        >>> path = sp.csr_array(np.eye(4, k=1) + np.eye(4, k=-1))  # 0 - 1 - 2 - 3
        >>> is_star_coloring(path, np.array([0, 1, 0, 1])), is_star_coloring(path, np.array([0, 1, 0, 2]))
        (False, True)
    """
    g = _adjacency(pattern)
    colors = np.asarray(colors, dtype=np.int64)
    src = np.repeat(np.arange(g.shape[0]), np.diff(g.indptr))
    dst = g.indices.astype(np.int64)
    if (colors[src] == colors[dst]).any():
        return False
    k = int(colors.max(initial=-1)) + 1
    # counts[v, c]: v's neighbours of colour c
    counts = np.bincount(src * k + colors[dst], minlength=g.shape[0] * k).reshape(-1, k)
    middle = (counts[src, colors[dst]] >= 2) & (counts[dst, colors[src]] >= 2)
    return not middle.any()


def _adjacency(pattern):
    """A symmetric pattern's adjacency graph: its off-diagonal non-zeros, as a boolean CSR array."""
    g = pattern.tocsr().astype(bool)
    g.setdiag(False)
    g.eliminate_zeros()
    return g


def bidirectional_colors(pattern, order="dsatur"):
    """A split of a Jacobian's rows between reverse and forward mode, with the colours of each side.

    The rows of ``by_rows`` are read from VJPs, one per colour of those rows (two of them sharing a
    column differ); the other rows' entries from JVPs, one per colour of the columns (two columns sharing
    one of the other rows differ). A Jacobian with one dense row and one dense column needs few colours
    this way, where either direction alone needs one per row or column. Candidates: no row on the VJP
    side, then the rows with at least ``t`` non-zeros for the 8 largest distinct counts ``t``; the split
    with the fewest colours in all is kept.

    Args:
        pattern: a SciPy sparse pattern (rows: outputs, columns: inputs).
        order: the greedy colouring's vertex order (``ORDERS``).

    Returns:
        ``(by_rows, column_colors, row_colors)``: a boolean mask of the rows; each column's colour (JVP
        side); each row's colour on the VJP side, -1 for the other rows.

    Example:
        >>> import numpy as np, scipy.sparse as sp
        >>> from polyad.api._coloring import bidirectional_colors
        >>> arrow = np.eye(6, dtype=bool); arrow[0] = arrow[:, 0] = True
        >>> by_rows, columns, rows = bidirectional_colors(sp.csr_array(arrow))
        >>> by_rows.tolist(), int(columns.max()) + 1 + int(rows.max()) + 1
        ([True, False, False, False, False, False], 3)
    """
    csr = pattern.tocsr().astype(bool)
    m = csr.shape[0]
    counts = np.diff(csr.indptr)
    best = None
    for t in [None, *sorted(set(counts.tolist()), reverse=True)[:8]]:
        by_rows = np.zeros(m, dtype=bool) if t is None else counts >= t
        columns = color_columns(csr[np.flatnonzero(~by_rows)], order)
        rows = np.full(m, -1, dtype=np.int64)
        rows[by_rows] = color_columns(csr[np.flatnonzero(by_rows)].T, order)
        total = int(columns.max(initial=-1)) + 1 + int(rows.max(initial=-1)) + 1
        if best is None or total < best[0]:
            best = (total, by_rows, columns, rows)
    return best[1], best[2], best[3]
