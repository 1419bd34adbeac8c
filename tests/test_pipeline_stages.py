# amaranth: UnusedElaboratable=no
"""The shared pipeline stages (:mod:`hdl.common.pipeline`) in Amaranth's simulator.

The stream slice runs under random producer idle cycles and consumer back-pressure against a
scoreboard (nothing lost, duplicated or reordered), at full rate when nothing stalls, and with
its ready and valid outputs checked to come from registers.  Deliberately broken slices (no
skid register, a skid register that is never emptied, a combinational ready) must fail the
same checks.
"""

import random

import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.back import verilog
from amaranth.sim import Simulator

from hdl.common.pipeline import DelayLine, StreamSlice, delay, stage

WIDTH = 8


def _simulate(dut, bench, clocked: bool = True):
    sim = Simulator(dut)
    if clocked:
        sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


# --------------------------------------------------------------------------------------------
# the stream slice


def check_stream(dut, seed: int, cycles: int = 1500, idle: float = 0.3,
                 back_pressure: float = 0.3) -> dict:
    """Drive ``dut`` (a stream slice) with random payloads, idle cycles and back-pressure, then
    drain it; assert that the consumer got every payload once, in order, that ``i.ready`` and
    the outputs do not follow the other side combinationally, and return the counts."""
    r = random.Random(seed)
    sent, got = [], []
    stats = {"cycles": 0, "in": 0, "out": 0}

    async def bench(ctx):
        count = 0
        valid, data = 0, 0
        for cyc in range(cycles + 50):
            draining = cyc >= cycles
            # a producer holds a payload until it is taken (valid never drops before ready)
            if not valid and not draining and r.random() >= idle:
                valid, data = 1, count % (1 << WIDTH)
                count += 1
            ready = 1 if draining else int(r.random() >= back_pressure)
            ctx.set(dut.i.valid, valid)
            ctx.set(dut.i.payload, data)
            # registered outputs: flipping the other side's inputs within the cycle changes
            # nothing on this side
            ctx.set(dut.o.ready, 1 - ready)
            in_ready_other = ctx.get(dut.i.ready)
            ctx.set(dut.o.ready, ready)
            assert ctx.get(dut.i.ready) == in_ready_other, \
                f"cycle {cyc}: i.ready follows o.ready combinationally"
            ctx.set(dut.i.valid, 1 - valid)
            out_valid_other = ctx.get(dut.o.valid)
            ctx.set(dut.i.valid, valid)
            assert ctx.get(dut.o.valid) == out_valid_other, \
                f"cycle {cyc}: o.valid follows i.valid combinationally"
            if ctx.get(dut.o.valid) and ready:
                got.append(ctx.get(dut.o.payload))
                stats["out"] += 1
            if valid and ctx.get(dut.i.ready):
                sent.append(data)
                stats["in"] += 1
                valid = 0
            stats["cycles"] += 1
            await ctx.tick()

    _simulate(dut, bench)
    assert got == sent, (f"seed {seed}: the consumer got {len(got)} payloads, the producer sent "
                         f"{len(sent)}; first difference at "
                         f"{next((k for k, (a, b) in enumerate(zip(got, sent)) if a != b), min(len(got), len(sent)))}")
    assert len(sent) > cycles // 3, f"only {len(sent)} transfers in {cycles} cycles"
    return stats


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("idle, back_pressure", [(0.3, 0.3), (0.0, 0.5), (0.6, 0.1)])
def test_stream_slice_loses_duplicates_and_reorders_nothing(seed, idle, back_pressure):
    check_stream(StreamSlice(WIDTH), seed, idle=idle, back_pressure=back_pressure)


def test_stream_slice_sustains_one_transfer_per_cycle():
    """Always valid, always ready: one transfer per cycle after the one-cycle latency."""
    stats = check_stream(StreamSlice(WIDTH), 7, cycles=400, idle=0.0, back_pressure=0.0)
    assert stats["in"] == 400 and stats["out"] == 400, stats


def test_stream_slice_resumes_full_rate_after_back_pressure():
    """A stall of a few cycles, then ready again: the slice takes a new payload every cycle
    once its skid register has drained (within one cycle)."""
    dut = StreamSlice(WIDTH)
    accepted = []

    async def bench(ctx):
        ctx.set(dut.i.valid, 1)
        for cyc in range(30):
            ctx.set(dut.i.payload, cyc)
            ctx.set(dut.o.ready, int(not 5 <= cyc < 9))
            accepted.append(ctx.get(dut.i.ready))
            await ctx.tick()

    _simulate(dut, bench)
    # ready drops once the skid register holds the payload that came in during the stall,
    # and is back for good one cycle after the consumer is
    assert accepted[:6] == [1] * 6 and accepted[6:10] == [0] * 4 and accepted[10:] == [1] * 20, \
        accepted


def test_stream_slice_with_a_layout_payload():
    from amaranth.lib import data

    lay = data.StructLayout({"a": 3, "b": 5})
    text = verilog.convert(StreamSlice(lay), name="slice", emit_src=False)
    assert "skid" in text and "i__payload" in text


class _NoSkid(StreamSlice):
    """Broken: no skid register; a payload taken while the consumer stalls is dropped."""

    def elaborate(self, platform):
        m = Module()
        i, o = self.i, self.o
        out_valid = Signal()
        out_payload = Signal(WIDTH)
        m.d.comb += [i.ready.eq(1), o.valid.eq(out_valid), o.payload.eq(out_payload)]
        with m.If(~out_valid | o.ready):
            m.d.sync += [out_payload.eq(i.payload), out_valid.eq(i.valid)]
        return m


class _StuckSkid(StreamSlice):
    """Broken: the skid register's payload goes out but the register is never marked empty,
    so it is sent again and again."""

    def elaborate(self, platform):
        m = Module()
        i, o = self.i, self.o
        skid_valid, skid = Signal(), Signal(WIDTH)
        out_valid, out_payload = Signal(), Signal(WIDTH)
        m.d.comb += [i.ready.eq(~skid_valid), o.valid.eq(out_valid), o.payload.eq(out_payload)]
        with m.If(~out_valid | o.ready):
            with m.If(skid_valid):
                m.d.sync += [out_payload.eq(skid), out_valid.eq(1)]
            with m.Else():
                m.d.sync += [out_payload.eq(i.payload), out_valid.eq(i.valid)]
        with m.Elif(i.valid & ~skid_valid):
            m.d.sync += [skid.eq(i.payload), skid_valid.eq(1)]
        return m


class _CombinationalReady(StreamSlice):
    """Broken (for timing): a plain pipeline register whose ready is the consumer's ready
    passed through combinationally; it moves the right data."""

    def elaborate(self, platform):
        m = Module()
        i, o = self.i, self.o
        out_valid, out_payload = Signal(), Signal(WIDTH)
        m.d.comb += [i.ready.eq(~out_valid | o.ready), o.valid.eq(out_valid),
                     o.payload.eq(out_payload)]
        with m.If(i.ready):
            m.d.sync += [out_payload.eq(i.payload), out_valid.eq(i.valid)]
        return m


@pytest.mark.parametrize("broken, why", [
    (_NoSkid, "the consumer got"),
    (_StuckSkid, "the consumer got"),
    (_CombinationalReady, "i.ready follows o.ready combinationally"),
], ids=["no-skid-register", "skid-never-emptied", "combinational-ready"])
def test_broken_stream_slices_are_caught(broken, why):
    with pytest.raises(AssertionError, match=why):
        check_stream(broken(WIDTH), 1)


# --------------------------------------------------------------------------------------------
# delay lines and stages


@pytest.mark.parametrize("depth", [0, 1, 3])
@pytest.mark.parametrize("enable", [False, True])
def test_delay_line_is_depth_enabled_cycles_late(depth, enable):
    dut = DelayLine(WIDTH, depth, enable=enable)
    r = random.Random(depth * 2 + enable)

    async def bench(ctx):
        line = [0] * depth            # register contents, newest first (reset value 0)
        for cyc in range(300):
            x = r.randrange(1 << WIDTH)
            en = int(r.random() < 0.6) if enable else 1
            ctx.set(dut.i, x)
            if enable:
                ctx.set(dut.en, en)
            want = line[-1] if depth else x
            assert ctx.get(dut.o) == want, f"depth {depth} cycle {cyc}: {ctx.get(dut.o)} != {want}"
            if depth and en:
                line = [x] + line[:-1]
            await (ctx.tick() if depth else ctx.delay(1e-6))

    _simulate(dut, bench, clocked=depth > 0)


def test_delay_line_of_depth_zero_is_a_wire():
    text = verilog.convert(DelayLine(WIDTH, 0), name="line", emit_src=False)
    assert "posedge" not in text and "clk" not in text
    text = verilog.convert(DelayLine(WIDTH, 2), name="line", emit_src=False)
    assert text.count("posedge clk") >= 1 and "line_d2" in text


def test_delay_rejects_a_negative_depth():
    with pytest.raises(ValueError, match="depth"):
        DelayLine(WIDTH, -1)
    with pytest.raises(ValueError, match="depth"):
        delay(Module(), Signal(4), -2)


class _TwoStage(wiring.Component):
    """``y = (a + b) * c`` with a cut after the sum (``cut``) and a registered output."""

    def __init__(self, cut: bool):
        self.cut = cut
        super().__init__({"a": In(8), "b": In(8), "c": In(8), "y": Out(17)})

    def elaborate(self, platform):
        m = Module()
        s = stage(m, {"sum": self.a + self.b, "c": self.c}, self.cut, name="add")
        out = stage(m, [s["sum"] * s["c"]], True, name="mul")
        m.d.comb += self.y.eq(out[0])
        return m


@pytest.mark.parametrize("cut", [False, True])
def test_stage_cuts_a_datapath_at_named_points(cut):
    dut = _TwoStage(cut)
    r = random.Random(5)
    latency = 2 if cut else 1

    async def bench(ctx):
        history = []
        for cyc in range(200):
            a, b, c = (r.randrange(256) for _ in range(3))
            ctx.set(dut.a, a)
            ctx.set(dut.b, b)
            ctx.set(dut.c, c)
            if cyc >= latency:
                pa, pb, pc = history[cyc - latency]
                assert ctx.get(dut.y) == (pa + pb) * pc, f"cycle {cyc}"
            history.append((a, b, c))
            await ctx.tick()

    _simulate(dut, bench)
    text = verilog.convert(_TwoStage(cut), name="two", emit_src=False)
    assert ("add_sum_d1" in text) == cut and "mul_0_d1" in text


def test_stage_without_the_cut_returns_the_values_themselves():
    m = Module()
    a, b = Signal(4), Signal(4)
    assert stage(m, [a, b], False) == [a, b]
    assert stage(m, (a,), False) == (a,)
    out = stage(m, {"x": a}, True, name="p")
    assert out["x"] is not a and out["x"].name == "p_x_d1"
