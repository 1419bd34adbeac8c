"""Checks shared by the testbenches of the FP → BFP block converters (:mod:`hdl.common.bfp`):
FAST's converter (:mod:`tb.fast.converter`) and Equinox's quantizer (:mod:`tb.equinox.quantizer`).

* :class:`Bench` — what the shared tests need of a converter's testbench;
* :class:`Golden` — the golden LFSR bank and cycle model of one reset-to-reset run;
* :func:`stream_blocks` — blocks through the unit's ``i``/``o`` streams under idle gaps and
  back-pressure: every output against the golden one, the lanes' LFSR states after every block
  that draws from them, and in every cycle ``i.ready``, ``o.valid`` and the sticky ``error``
  against the unit's cycle model (so a block or an error that comes a cycle early or late, at
  any ``pipeline`` depth, fails);
* :func:`random_block` — one block of FP32 values of a random kind;
* :func:`random_streams`, :func:`one_per_cycle` and :func:`sticky_error` — the bodies of the
  random, throughput and error tests.

A test starts with :func:`tb.common.setup` (configuration, clock, reset, random generators).
"""

from typing import Callable, NamedTuple

import numpy as np

from golden.common.lfsr import LaneRNG

from . import reset, setup, test_size, uint
from .layouts import unpack
from .streams import Sink, Source, cross, quiet, run


class Bench(NamedTuple):
    """One converter's testbench, as the shared tests (:func:`random_streams`,
    :func:`one_per_cycle`) use it."""

    #: the configuration class (read from the environment by :func:`tb.common.setup`)
    config: type
    #: ``golden(cfg)``: the :class:`Golden` models of a run from reset
    golden: Callable
    #: ``random_items(cfg, gen, n)``: ``n`` random input payloads drawn from the NumPy
    #: generator ``gen``
    random_items: Callable
    #: ``await stream(dut, cfg, items, r, gold, gap, p_ready)``: the testbench's
    #: :func:`stream_blocks` run of the payloads ``items``, returning its outputs, source and sink
    stream: Callable


class Golden:
    """The golden models of one reset-to-reset run: the LFSR bank twice — ``outputs`` draws the
    expected outputs' noise (in the golden model's order), ``states`` follows the DUT's lane
    states (``lfsr0 ..``) cycle by cycle — and ``sim``, the unit's cycle model after reset
    (:class:`golden.fast.converter.ConverterSim`, :class:`golden.equinox.QuantizerSim`: a
    ``step(block, ready)`` per cycle returning ``ready``, ``taken``, ``out``, ``error``)."""

    def __init__(self, lanes: int, bits: int, sim):
        self.lanes = lanes
        self.outputs = LaneRNG(lanes=lanes, bits=bits)
        self.states = LaneRNG(lanes=lanes, bits=bits)
        self.sim = sim


def pad(values, lanes: int) -> np.ndarray:
    """``values`` as one FP32 block of ``lanes`` values (cut, or padded with zeros)."""
    x = np.zeros(lanes, dtype=np.float32)
    v = np.asarray(values, dtype=np.float32)[:lanes]
    x[:v.size] = v
    return x


async def stream_blocks(dut, layouts, items, want, r, golden: Golden, draws, gap=0.0,
                        p_ready=1.0, what: str = "block"):
    """Stream the input payloads ``items`` through the unit (sources idle with probability
    ``gap``, the sink is ready with probability ``p_ready``) and check it.

    ``layouts`` is ``(input_layout, output_layout)``; ``want`` holds the golden output payloads,
    ``None`` for a block with an Inf or NaN (its output is unspecified).  In every cycle
    ``i.ready``, ``o.valid`` (with the index of the block it shows) and the sticky ``error``
    must read what ``golden.sim`` gives for the block offered (its ``x``) and the sink's
    ``ready`` in that cycle.  ``draws(item)``: the block steps the LFSRs; in the cycle after it
    is taken the lane states equal ``golden.states`` after its next draw.  Returns the unpacked
    outputs, the source and the sink.
    """
    lay_in, lay_out = layouts
    src = Source(dut, "i", [(it, {}) for it in items], r, gap, layout=lay_in)
    out = Sink(dut, "o", r, p_ready)
    accepted = 0
    pending = False            # an LFSR step happened at the last edge
    first = golden.sim.taken   # the cycle model's index of this stream's first block

    def check(cycle):
        nonlocal accepted, pending
        if pending:
            want_state = golden.states.state.tolist()
            got = [uint(getattr(dut, f"lfsr{j}")) for j in range(golden.lanes)]
            assert got == want_state, f"LFSR states {got} differ from LaneRNG {want_state}"
            pending = False
        ready = uint(dut.o__ready)
        model = golden.sim.step(items[accepted]["x"] if uint(dut.i__valid) else None, ready)
        seen = {"i.ready": uint(dut.i__ready), "o.valid": uint(dut.o__valid),
                "error": uint(dut.error)}
        expect = {"i.ready": int(model.ready), "o.valid": int(model.out is not None),
                  "error": int(model.error)}
        assert seen == expect, f"cycle {cycle}: {seen}, the cycle model gives {expect}"
        if model.out is not None and ready:
            assert model.out - first == len(out.got) - 1, \
                f"cycle {cycle}: {what} {len(out.got) - 1} out, the cycle model shows " \
                f"{model.out - first}"
        if len(src.accepted_cycles) > accepted:          # an item was taken this cycle
            it = items[accepted]
            accepted += 1
            if draws(it):
                golden.states.draw()
                pending = True

    limit = 20 + int(3 * len(items) / min(1 - gap, p_ready))
    await run(dut, [src], [out], lambda: len(out.got) >= len(want) and not pending, limit,
              check=check)
    assert golden.sim.idle, f"the cycle model still holds {what}s in flight"
    await quiet(dut, [out])
    got = [unpack(lay_out, v) for v in out.got]
    assert len(got) == len(want), f"{len(got)} {what}s out, expected {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        if w is not None:
            assert g == w, f"{what} {k} ({items[k]}): got {g}, golden {w}"
    return got, src, out


def random_block(gen: np.random.Generator, lanes: int, spread: int, grid: bool = False):
    """One FP32 block of a random kind: N(0, 1); powers of two of random sign spread over
    ``2**-spread .. 2**spread``; sparse N(0, 1) with -0.0; (with ``grid``) quarter-integers up
    to ±128 scaled by a power of two, exact ties and extremes on the block's grid; random bit
    patterns (no Inf/NaN) with 30 % subnormals."""
    kinds = 5 if grid else 4
    kind = gen.integers(0, kinds)
    if kind == 0:
        x = gen.standard_normal(lanes)
    elif kind == 1:
        x = gen.choice([-1, 1], lanes) * np.exp2(gen.uniform(-spread, spread, lanes))
    elif kind == 2:
        x = gen.standard_normal(lanes) * (gen.random(lanes) < 0.3)
        x = np.where(gen.random(lanes) < 0.3, -0.0, x)
    elif kind == kinds - 1:
        bits = gen.integers(0, 1 << 32, lanes, dtype=np.uint64).astype(np.uint32)
        bits = np.where((bits >> 23) & 0xFF == 255, bits & 0xBFFFFFFF, bits)
        bits = np.where(gen.random(lanes) < 0.3, bits & 0x807FFFFF, bits)    # subnormals
        x = bits.view(np.float32)
    else:
        x = gen.integers(-512, 512, lanes) / 4.0 * 2.0 ** int(gen.integers(-8, 8))
    return np.asarray(x, dtype=np.float32)


async def random_streams(dut, bench: Bench, name: str) -> None:
    """The body of the random test ``name``: the unit's test size (``TRAINFAB_TEST_SIZE``) in
    random items streamed under every combination of idle gaps and back-pressure
    (:func:`tb.common.streams.cross`), one golden run throughout (LFSR states checked across
    the parts)."""
    cfg, r, gen = await setup(dut, bench.config, name)
    gold = bench.golden(cfg)
    for part, gap, p_ready in cross(bench.random_items(cfg, gen, test_size())):
        await bench.stream(dut, cfg, part, r, gold, gap, p_ready)


async def one_per_cycle(dut, bench: Bench, name: str, n: int = 40) -> None:
    """The body of the throughput test ``name``: ``n`` random items, input always offered and
    output always ready, were taken in consecutive cycles and each left the configuration's
    ``latency`` (its stages plus ``pipeline``) cycles later."""
    cfg, r, gen = await setup(dut, bench.config, name)
    items = bench.random_items(cfg, gen, n)
    _, src, out = await bench.stream(dut, cfg, items, r, bench.golden(cfg))
    acc = src.accepted_cycles
    assert acc == list(range(acc[0], acc[0] + len(items))), f"input not every cycle: {acc}"
    assert out.cycles == [c + cfg.latency for c in acc], f"outputs {out.cycles}, accepted {acc}"


async def sticky_error(dut, bad_items, good_items, stream) -> None:
    """For every item of ``bad_items`` (blocks with an Inf or NaN), from reset: ``error`` reads
    0, then ``await stream([bad, *good_items])`` (a :func:`stream_blocks` run with a fresh
    :class:`Golden`) sees it set in the cycle the cycle model gives (``pipeline`` advances after
    the cycle after the bad block is taken) and kept while the good blocks still convert;
    finally reset clears it."""
    for bad in bad_items:
        await reset(dut)
        assert uint(dut.error) == 0, "error set after reset"
        await stream([bad, *good_items])
        assert uint(dut.error) == 1, "error is not sticky"
    await reset(dut)
    assert uint(dut.error) == 0, "reset does not clear error"


__all__ = ["Bench", "Golden", "pad", "stream_blocks", "random_block", "random_streams",
           "one_per_cycle", "sticky_error"]
