"""FAST's variable-precision fMAC as a unit (registry unit ``fast.fmac``, spec §4): its
configuration, a run of group pairs (:func:`fmac_run`, the numerics of
:func:`golden.fast.numerics.fmac_group`) and its cycle models (:class:`FMACSim`, the
interleaved :class:`FMACSlots`, :func:`fmac_cycles`)."""

from dataclasses import dataclass

import numpy as np

from .. import ConfigError, check_int
from ..common.fp_add import fp32_add_bits
from ..common.stream import interleaved_shown
from .numerics import (FMAC_WIDTHS, FastInputError, _check_fmac_width, _signed, fmac_group,
                       fp_gen_bits, rounds)


#: most register stages between a round's operands and the accumulator (:class:`FMACConfig`)
FMAC_MAX_PIPELINE = 3
#: most interleaved pairs (:class:`FMACConfig`.contexts)
FMAC_MAX_CONTEXTS = 6


@dataclass(frozen=True)
class FMACConfig:
    """Configuration of the fMAC (registry unit ``fast.fmac``, spec §4)."""

    #: elements per group = 2b x 2b multipliers (paper: 16)
    group: int = 16
    #: widest run-time operand width the operand registers hold: 2, 4, 6 or 8 (§4.2's table)
    m_max: int = 8
    #: register stages between a round's operands and the FP32 accumulation, 0..3 (0: the
    #: paper's one-cycle round): 1 registers the FP generator's FP32 value, 2 also the adder
    #: tree's sum ``P`` and the round's exponent, 3 also the 2b x 2b products.  The
    #: accumulation itself stays one cycle, so results are unchanged; every round reaches the
    #: accumulator ``pipeline`` cycles later (:class:`FMACSim`)
    pipeline: int = 0
    #: interleaved dot products, 1..6 (1: the paper's fMAC): the fMAC's state (the pair's
    #: registers, the round counters) is held ``contexts`` times and the FP32 adder gets
    #: ``contexts - 1`` register stages inside the accumulation loop (C-slow), so ``contexts``
    #: dot products share the datapath, each one served every ``contexts``-th cycle
    #: (:class:`FMACSlots`); each is accumulated exactly as by the one-context fMAC
    contexts: int = 1

    def __post_init__(self):
        check_int(self, "group", 1, 64)
        if isinstance(self.m_max, bool) or self.m_max not in FMAC_WIDTHS:
            raise ConfigError(type(self).__name__, "m_max", self.m_max, "one of 2, 4, 6, 8")
        check_int(self, "pipeline", 0, FMAC_MAX_PIPELINE)
        check_int(self, "contexts", 1, FMAC_MAX_CONTEXTS)


def fmac_run(cfg: FMACConfig, pairs) -> tuple:
    """The fMAC over a sequence of group pairs ``(x, mx, y, my, clear)`` (``x``/``y`` are
    ``(Es, signs, q)``): the accumulator after each pair (``np.float32``; ``clear`` starts it from
    +0) and the cycles each pair takes (``rounds(mx, my)``), paper mode."""
    acc = np.float32(0)
    accs, cycles = [], []
    for x, mx, y, my, clear in pairs:
        acc = fmac_group(np.float32(0) if clear else acc, x, mx, y, my)
        accs.append(acc)
        cycles.append(rounds(mx, my))
    return accs, cycles


@dataclass(frozen=True)
class FMACCycle:
    """The fMAC's outputs in one clock cycle (before its edge): ``grp.ready``, ``busy``,
    ``last``, the accumulator register (FP32 bits) and the sticky ``error``."""

    ready: bool
    busy: bool
    last: bool
    acc: int
    error: bool
    #: with ``contexts > 1``: the dot product served in the cycle, and the one ``acc`` shows
    slot: int = 0
    acc_slot: int = 0


class FMACSim:
    """Cycle model of the fMAC (the timing contract of :class:`hdl.fast.FMAC`): :meth:`outputs`
    for the current cycle, then :meth:`step` for the clock edge (or :meth:`cycle` for both).

    A pair ``(x, mx, y, my, clear)`` offered in a cycle in which ``ready`` is high is taken at
    that edge; its ``rounds(mx, my)`` rounds run in the following cycles (``busy``), X's chunks
    outer, most significant first; ``last`` flags the final round, in which ``ready`` is high
    again (``ready = ~busy | last``).  A width above ``m_max`` sets the sticky ``error`` at the
    edge that takes the pair, which runs at ``m_max``.  The round of cycle ``t`` (its FP
    generator value, and whether it starts from +0: the first round of a pair with ``clear``)
    is added into the accumulator at edge ``t + cfg.pipeline``, so ``acc`` holds a pair's
    result from the cycle ``pipeline + 1`` after its last round; cycles without a round leave
    the accumulator as it is."""

    def __init__(self, cfg: FMACConfig = FMACConfig()):
        if cfg.contexts != 1:
            raise FastInputError("cfg.contexts", cfg.contexts, "1 (FMACSlots models more)")
        self.cfg = cfg
        zero = (0, np.zeros(cfg.group, np.int64), np.zeros(cfg.group, np.int64))
        self.x = self.y = zero
        self.kx = self.ky = 1
        self.cx = self.cy = 0
        self.fresh = self.busy = self.error = False
        self.acc = 0
        #: rounds in flight between the FP generator and the accumulator, oldest first:
        #: ``(en, fresh, fp32 bits)``
        self.line = [(False, False, 0)] * cfg.pipeline

    @property
    def last(self) -> bool:
        return self.busy and self.cx == self.kx - 1 and self.cy == self.ky - 1

    @property
    def idle(self) -> bool:
        """No round running or in flight: ``acc`` holds the result of every pair taken."""
        return not self.busy and not any(en for en, _, _ in self.line)

    def outputs(self) -> FMACCycle:
        return FMACCycle(ready=not self.busy or self.last, busy=self.busy, last=self.last,
                         acc=self.acc, error=self.error)

    def cycle(self, pair=None) -> FMACCycle:
        out = self.outputs()
        self.step(pair)
        return out

    def _operand(self, grp):
        g, mask = self.cfg.group, (1 << self.cfg.m_max) - 1
        Es, s, q = grp
        s, q = np.asarray(s, np.int64).reshape(-1), np.asarray(q, np.int64).reshape(-1)
        if s.size != g or q.size != g:
            raise FastInputError("group", f"{s.size} signs, {q.size} magnitudes", f"{g} each")
        return int(Es), s & 1, q & mask

    def _round_bits(self) -> int:
        (ex, sx, qx), (ey, sy, qy) = self.x, self.y
        chx = (qx >> (2 * (self.kx - 1 - self.cx))) & 3
        chy = (qy >> (2 * (self.ky - 1 - self.cy))) & 3
        P = int(np.sum(_signed(sx ^ sy, chx * chy)))
        return int(fp_gen_bits(P, ex - 2 * self.cx, ey - 2 * self.cy))

    def step(self, pair=None) -> bool:
        """The clock edge with ``pair`` offered (``None``: ``valid`` low); whether it was
        taken."""
        take = pair is not None and self.outputs().ready
        last = self.last
        self.line.append((self.busy, self.fresh, self._round_bits() if self.busy else 0))
        en, fresh, bits = self.line.pop(0)
        if en:
            self.acc = int(fp32_add_bits(np.uint32(0 if fresh else self.acc), np.uint32(bits)))
        if take:
            x, mx, y, my, clear = pair
            kmax = self.cfg.m_max // 2
            kx, ky = _check_fmac_width("mx", mx) // 2, _check_fmac_width("my", my) // 2
            self.error = self.error or kx > kmax or ky > kmax
            self.x, self.y = self._operand(x), self._operand(y)
            self.kx, self.ky = min(kx, kmax), min(ky, kmax)
            self.cx = self.cy = 0
            self.fresh, self.busy = bool(clear), True
        else:
            if self.busy:
                self.fresh = False
            if last:
                self.busy = False
            elif self.busy:
                if self.cy == self.ky - 1:
                    self.cy, self.cx = 0, self.cx + 1
                else:
                    self.cy += 1
        return take


class FMACSlots:
    """Cycle model of the fMAC with ``C = cfg.contexts > 1`` interleaved dot products (the
    timing contract of :class:`hdl.fast.FMAC`; same interface as :class:`FMACSim`).

    Cycle ``t`` serves dot product ``c = (slot + t) mod C`` (``slot``: the unit's ``slot``
    output in the first cycle): ``ready``, ``busy`` and ``last`` are that context's, a pair
    taken in the cycle becomes that context's, and the context runs one round, exactly as the
    one-context fMAC (:class:`FMACSim` at depth 0) does in its own cycles: every context
    advances once every ``C`` cycles.  A round run in cycle ``u`` reaches the accumulator
    loop ``pipeline`` cycles later and leaves the adder's ``C - 1`` stages ``C`` edges after
    that: ``acc`` shows, in cycle ``t``, context ``(slot + t - pipeline) mod C``
    (``acc_slot``) with its rounds up to cycle ``t - pipeline - C``.  ``error`` is the sticky
    OR over the contexts."""

    def __init__(self, cfg: FMACConfig, slot: int = 0):
        C = cfg.contexts
        if C < 2:
            raise FastInputError("cfg.contexts", C, "2 or more (FMACSim models one)")
        if isinstance(slot, bool) or not isinstance(slot, int) or not 0 <= slot < C:
            raise FastInputError("slot", slot, f"0..{C - 1}")
        self.cfg = cfg
        one = FMACConfig(group=cfg.group, m_max=cfg.m_max)
        self.sims = [FMACSim(one) for _ in range(C)]
        self.slot0 = slot
        self.t = 0
        #: the served context's accumulator after each cycle's edge
        self.after = []
        #: the cycle of the latest round run
        self.last_round = -1

    def _served(self, t: int) -> int:
        return (self.slot0 + t) % self.cfg.contexts

    def _shown(self, t: int) -> tuple:
        c = interleaved_shown(t, self.cfg.pipeline, self.cfg.contexts, self.slot0)
        u = t - self.cfg.pipeline - self.cfg.contexts
        return c, (self.after[u] if u >= 0 else 0)

    @property
    def idle(self) -> bool:
        """No round running, and every round run is in the accumulator loop's output."""
        return (not any(s.busy for s in self.sims)
                and self.t > self.last_round + self.cfg.pipeline + self.cfg.contexts - 1)

    def outputs(self) -> FMACCycle:
        c = self._served(self.t)
        o = self.sims[c].outputs()
        shown, acc = self._shown(self.t)
        return FMACCycle(ready=o.ready, busy=o.busy, last=o.last, acc=acc,
                         error=any(s.error for s in self.sims), slot=c, acc_slot=shown)

    def cycle(self, pair=None) -> FMACCycle:
        out = self.outputs()
        self.step(pair)
        return out

    def step(self, pair=None) -> bool:
        sim = self.sims[self._served(self.t)]
        if sim.busy:
            self.last_round = self.t
        taken = sim.step(pair)
        self.after.append(sim.acc)
        self.t += 1
        return taken


def fmac_sim(cfg: FMACConfig, slot: int = 0):
    """The cycle model of ``cfg``: :class:`FMACSim`, or :class:`FMACSlots` with ``contexts``
    (whose first cycle serves ``slot``)."""
    return FMACSim(cfg) if cfg.contexts == 1 else FMACSlots(cfg, slot)


@dataclass
class FMACRun:
    """Pairs through :class:`FMACSim`: the input of every cycle (the pair offered, or
    ``None``), the model's outputs in every cycle, the cycle in which each pair was taken and
    the accumulator after each pair (:func:`fmac_run`'s, which starts from +0; with
    ``contexts``, the pair's own context's, continuing the accumulator it had)."""

    inputs: list
    outputs: list
    accepted: list
    accs: list


def fmac_cycles(cfg: FMACConfig, items, sim: FMACSim | None = None) -> FMACRun:
    """Drive ``items`` through the cycle model: a pair is offered (``valid`` high) from the
    cycle after the previous item until it is taken; ``None`` is one idle cycle.  After the
    last item the run idles until every round has reached the accumulator, and ends with the
    cycle in which ``acc`` holds the last pair's result.  ``sim`` continues a model from the
    state an earlier run left (default: a fresh fMAC after reset)."""
    sim = sim or fmac_sim(cfg)
    if sim.cfg != cfg:
        raise FastInputError("sim", sim.cfg, f"a model of {cfg}")
    run = FMACRun([], [], [], [])
    # with contexts: each context's accumulator as the run finds it
    start = [s.acc for s in sim.sims] if cfg.contexts > 1 else None

    def clock(item) -> bool:
        run.inputs.append(item)
        run.outputs.append(sim.outputs())
        taken = sim.step(item)
        if taken:
            run.accepted.append(len(run.inputs) - 1)
        return taken

    for item in items:
        while not clock(item) and item is not None:
            pass
    while not sim.idle:
        clock(None)
    clock(None)
    pairs = [item for item in items if item is not None]
    if cfg.contexts == 1:
        run.accs = fmac_run(cfg, pairs)[0] if pairs else []
        return run
    # each context accumulates its own pairs, from the accumulator it had
    run.accs = [None] * len(pairs)
    acc = [np.uint32(bits).view(np.float32) for bits in start]
    for k, t in enumerate(run.accepted):
        c = run.outputs[t].slot
        x, mx, y, my, clear = pairs[k]
        acc[c] = fmac_group(np.float32(0) if clear else acc[c], x, mx, y, my)
        run.accs[k] = acc[c]
    return run


__all__ = ["FMAC_MAX_PIPELINE", "FMAC_MAX_CONTEXTS", "FMACConfig", "fmac_run", "FMACCycle", "FMACSim", "FMACSlots", "fmac_sim", "FMACRun", "fmac_cycles"]
