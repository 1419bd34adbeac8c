"""What every PE-tile model shares: operand-array checks and the result record.

A tile of ``rows`` x ``cols`` PEs (spec ``docs/specs/fpraker.md`` §5, §6) computes, for every PE
``(r, c)``, the dot product ``sum_s sum_i A[c, s, i] * B[r, s, i]``: ``A`` holds the operand
streamed down each column (the serial, term-encoded one in FPRaker), shape ``(cols, groups,
lanes)``; ``B`` the operand shared along each row, shape ``(rows, groups, lanes)``.  Both are
bfloat16 bit patterns.
"""

from dataclasses import field, fields, make_dataclass
from typing import NamedTuple

import numpy as np

from .. import ConfigError


class TileResult(NamedTuple):
    """Result of a tile run.

    ``stalls`` maps a stall cause to a count of *lane-cycles* (one PE lane idle for one cycle,
    see the tile model's docstring for the causes); ``useful`` counts the lane-cycles that
    processed something and ``lane_cycles`` is ``cycles * rows * cols * lanes``, so ``useful``
    plus every stall count equals ``lane_cycles``.
    """

    #: bf16 read-out of every PE, shape (rows, cols), uint16
    out: np.ndarray
    #: tile cycles from the first group's start to the last group's finish
    cycles: int
    #: stall cause -> lane-cycles
    stalls: dict
    #: cycles of every (column, group), shape (cols, groups), int64
    group_cycles: np.ndarray
    #: lane-cycles that processed a term (FPRaker) or a product (bit-parallel)
    useful: int
    #: cycles * rows * cols * lanes
    lane_cycles: int


def check_tile_operands(A, B, rows: int, cols: int, lanes: int):
    """``A`` (cols, groups, lanes) and ``B`` (rows, groups, lanes) as int64 arrays of bf16 bits.

    Raises
    ------
    ValueError
        A non-integer dtype, a wrong number of dimensions, a shape that does not match the tile
        (``cols``/``rows``/``lanes``) or the other operand's group count, no group at all, or
        values outside 0..0xFFFF.
    """
    arrays = []
    for name, x, lead, what in (("A", A, cols, "cols"), ("B", B, rows, "rows")):
        x = np.asarray(x)
        if x.dtype.kind not in "iu":
            raise ValueError(f"{name} must hold integer bf16 bit patterns, got dtype {x.dtype}")
        if x.ndim != 3 or x.shape[0] != lead or x.shape[2] != lanes:
            raise ValueError(f"{name} must have shape ({what}={lead}, groups, lanes={lanes}), "
                             f"got {x.shape}")
        if x.size and (x.min() < 0 or x.max() > 0xFFFF):
            raise ValueError(f"{name} holds values outside the 16-bit range 0..0xFFFF")
        arrays.append(x.astype(np.int64))
    A, B = arrays
    if A.shape[1] != B.shape[1]:
        raise ValueError(f"A has {A.shape[1]} groups and B {B.shape[1]}: every column and row "
                         "stream needs the same number of groups")
    if A.shape[1] == 0:
        raise ValueError("A and B hold no group: a tile run needs at least one")
    return A, B


def gemm_groups(S, P, lanes: int):
    """Serial rows ``S`` (M, K) and parallel rows ``P`` (N, K) as int64 arrays zero-padded to
    whole groups: ``(S (M, G, lanes), P (N, G, lanes))``.

    Raises
    ------
    ValueError
        Non-integer dtypes, arrays that are not 2-D, or reduction lengths that differ (the two
        operands cannot be multiplied).
    """
    S, P = np.asarray(S), np.asarray(P)
    for name, x in (("serial", S), ("parallel", P)):
        if x.dtype.kind not in "iu":
            raise ValueError(f"{name} operand must hold integer bf16 bit patterns, got dtype "
                             f"{x.dtype}")
        if x.ndim != 2:
            raise ValueError(f"{name} operand must be 2-D (rows, K), got shape {x.shape}")
    if S.shape[1] != P.shape[1]:
        raise ValueError(f"cannot multiply: serial operand {S.shape} and parallel operand "
                         f"{P.shape} have different reduction lengths ({S.shape[1]} vs "
                         f"{P.shape[1]})")
    K = S.shape[1]
    G = max(1, -(-K // lanes))
    pad = G * lanes - K
    S = np.pad(S.astype(np.int64), ((0, 0), (0, pad))).reshape(S.shape[0], G, lanes)
    P = np.pad(P.astype(np.int64), ((0, 0), (0, pad))).reshape(P.shape[0], G, lanes)
    return S, P




def pe_tile_base(pe_cls, *layout, **defaults):
    """A frozen dataclass to derive a tile configuration from: one flat list of the tile's own
    fields and every field of the PE configuration ``pe_cls`` (so presets and ``--set`` reach
    each of them by name).

    ``layout`` gives the order: ``(name, type, default, doc)`` places a tile field and says what
    it is, a name places a PE field; the PE fields it does not name follow in the PE's order.
    A PE field has the PE's type, default and documentation (its ``#:`` comment), or the
    default ``defaults`` gives it.  A tile field named like a PE field (the FPRaker tile's
    ``pipeline``) is the tile's own, and the PE keeps its default.  :attr:`pe` is the
    configuration of one PE, and the base's ``__post_init__`` builds it, which validates the
    PE fields (the :class:`~golden.ConfigError` names the tile's class); a tile's own
    ``__post_init__`` checks its fields, then calls it.  ``__field_docs__`` holds the tile
    fields' documentation and ``__pe_class__`` the PE class, whose field comments document the
    others (``trainfab list``).
    """
    pe_fields = {f.name: f for f in fields(pe_cls)}
    unknown = set(defaults) - set(pe_fields)
    if unknown:
        raise TypeError(f"defaults for fields {pe_cls.__name__} does not have: {sorted(unknown)}")
    placed = {entry if isinstance(entry, str) else entry[0] for entry in layout}
    # a tile field named like a PE field is the tile's own: the PE keeps its default
    own = {entry[0] for entry in layout if not isinstance(entry, str)}

    def pe_field(name):
        f = pe_fields[name]
        return name, f.type, field(default=defaults.get(name, f.default), metadata=f.metadata)

    spec = [pe_field(entry) if isinstance(entry, str) else entry[:3] for entry in layout]
    spec += [pe_field(name) for name in pe_fields if name not in placed]

    def pe(self):
        return pe_cls(**{name: getattr(self, name) for name in pe_fields if name not in own})

    def __post_init__(self):
        try:
            self.pe
        except ConfigError as e:
            raise ConfigError(type(self).__name__, e.field, e.value, e.allowed) from None

    pe.__doc__ = f"The configuration of one PE (:class:`{pe_cls.__name__}`)."
    docs = {entry[0]: entry[3] for entry in layout if not isinstance(entry, str)}
    base = make_dataclass(f"{pe_cls.__name__}Tile", spec, frozen=True,
                          namespace={"pe": property(pe), "__post_init__": __post_init__,
                                     "__field_docs__": docs, "__pe_class__": pe_cls})
    base.__module__ = pe_tile_base.__module__
    return base


__all__ = ["TileResult", "check_tile_operands", "gemm_groups", "pe_tile_base"]
