"""MACs per cycle of the term-serial designs at a configuration, for the comparisons at each
design's own clock (:class:`flows.declare.OwnClock`): the FPRaker tile and PE counted by their
golden cycle models on fixed operands, the fMAC by its rounds per group."""

import functools


#: the operands the own-clock comparison counts the FPRaker designs' cycles on (seed 0): a
#: MiniLM-sized layer (ReLU'd 128 × 384 activations against 384 × 384 N(0,1) weights, the
#: tile bench's) and N(0,1) both
OWN_CLOCK_OPERANDS = {"MiniLM-sized layer (ReLU × N(0,1))": ("relu", 128, 384, 384),
                      "random N(0,1)": ("normal", 128, 384, 384)}


def _golden_config(cls, config: dict):
    import dataclasses

    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in config.items() if k in names})


def tile_work(config: dict) -> list:
    """MACs per tile cycle of the FPRaker tile at ``config`` on :data:`OWN_CLOCK_OPERANDS`
    (the tile GEMM model's cycle count: every stall of the tile included; computed once per
    configuration and process)."""
    return list(_tile_work(tuple(sorted(config.items()))))


@functools.cache
def _tile_work(items: tuple) -> tuple:
    import numpy as np

    from golden.fpraker.pe import random_operands
    from golden.fpraker.tile import TileConfig
    from golden.fpraker.tile_batch import tile_gemm_fast

    cfg = _golden_config(TileConfig, dict(items))
    out = []
    for label, (kind, M, K, N) in OWN_CLOCK_OPERANDS.items():
        rng = np.random.default_rng(0)
        S, _ = random_operands(rng, M, K, kind)
        P, _ = random_operands(rng, N, K, "normal")
        r = tile_gemm_fast(S, P, cfg)
        out.append((label, float(r.macs / r.cycles)))
    return tuple(out)


def pe_work(config: dict) -> list:
    """MACs per cycle of the standalone FPRaker PE at ``config`` on :data:`OWN_CLOCK_OPERANDS`
    (dot products of K = 384 from a cleared accumulator, the golden model's cycles).  An
    interleaved PE (``pipeline >= 1``) takes one step per cycle over its dot products, each
    with the one-context cycle count, so the figure holds for it too."""
    import numpy as np

    from golden.fpraker.pe import PEConfig, pe_dot_batch, random_operands

    cfg = _golden_config(PEConfig, config)
    out = []
    for label, (kind, M, K, _) in OWN_CLOCK_OPERANDS.items():
        A, B = random_operands(np.random.default_rng(0), M, K, kind)
        cycles = pe_dot_batch(A, B, cfg)[1].sum()
        out.append((label, float(M * K / cycles)))
    return out


def fmac_work(config: dict) -> list:
    """MACs per cycle of the fMAC at ``config``: a group of ``group`` products takes
    ``(mx/2)(my/2)`` cycles (:func:`golden.fast.numerics.rounds`), for each operand width up to
    4 bits (FAST's widths)."""
    from golden.fast.numerics import rounds

    return [(f"{m}-bit mantissas", config["group"] / rounds(m, m))
            for m in (2, 4) if m <= config["m_max"]]


__all__ = ["OWN_CLOCK_OPERANDS", "tile_work", "pe_work", "fmac_work"]
