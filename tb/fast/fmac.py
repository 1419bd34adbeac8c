"""Testbench of FAST's fMAC (``fast.fmac``) against the cycle model
``golden.fast.fmac.FMACSim`` and ``golden.fast.fmac.fmac_run``.

Group pairs stream in as fast as the fMAC takes them (and, in the random test, with random idle
cycles).  Every cycle, ``grp.ready``, ``busy``, ``last``, ``error`` and the FP32 accumulator must
equal the cycle model's: the next pair is accepted exactly in the cycle the model says the
current one ends (``rounds(mx, my)`` cycles, T16), and every round reaches the accumulator
exactly ``pipeline`` cycles after it ran, so a result a cycle early or late fails.  The model's
accumulator must hold :func:`fmac_run`'s result of each pair in the cycle ``pipeline + 1``
after the pair's last round.  Dot products chain pairs without ``clear``.

With ``contexts = C > 1`` the same tests run against :class:`golden.fast.fmac.FMACSlots`:
every cycle's ``slot`` and ``acc_slot`` too, and each pair's result, which ``acc`` shows
``C (rounds + 1) + pipeline`` cycles after the pair was taken, against the one-context fMAC
over the pairs of its own context.

``power_run`` (``trainfab power``, registered only in power runs) converts the power flow's bf16
operand groups into FAST's BFP with :func:`golden.fast.numerics.bfp_quantize_groups`.
"""

import functools

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly

from golden.common import bf16_to_float
from golden.fast.numerics import FMAC_WIDTHS, bfp_quantize_groups, rounds
from golden.fast.fmac import FMACConfig, fmac_cycles, fmac_sim
from hdl.fast import pair_layout
from tb.common.power import PowerWindow, group_operands, power_test

from ..common import config_from_env, reset, rng, start, test_size, uint
from ..common.layouts import pack


@functools.cache
def _layout(cfg):
    return pair_layout(cfg)


def operand_value(grp) -> dict:
    """A BFP group ``(Es, signs, q)`` as the value of :func:`hdl.fast.operand_layout`."""
    Es, signs, q = grp
    return {"es": int(Es), "sign": sum(int(s) << j for j, s in enumerate(signs)),
            "q": [int(v) for v in q]}


def payload(cfg, x, mx, y, my, clear) -> int:
    return pack(_layout(cfg), {"x": operand_value(x), "y": operand_value(y), "mx": mx // 2 - 1,
                               "my": my // 2 - 1, "clear": int(clear)})


def _bits(acc) -> int:
    return int(np.float32(acc).view(np.uint32))


async def stream(dut, cfg, sim, pairs, where: str, r=None, gap: float = 0.0):
    """Feed ``pairs`` as fast as the fMAC takes them (with an idle cycle before a pair with
    probability ``gap``), then idle until the last result is in the accumulator; check every
    cycle's outputs against ``sim`` (:class:`FMACSim`, continued from the state earlier runs
    left) and the accumulator after each pair against :func:`fmac_run`.  Returns
    ``fmac_run``'s accumulators and cycles per pair."""
    items = []
    for pair in pairs:
        while r is not None and r.random() < gap:
            items.append(None)
        items.append(pair)
    run = fmac_cycles(cfg, items, sim)
    cycles = [rounds(p[1], p[3]) for p in pairs]
    C = cfg.contexts
    for k, t in enumerate(run.accepted):
        # its last round runs C * rounds cycles after it is taken
        done = t + C * (cycles[k] + 1) + cfg.pipeline
        assert run.outputs[done].acc == _bits(run.accs[k]), \
            f"{where}: the cycle model's pair {k} differs from fmac_run"
        assert run.outputs[done].acc_slot == run.outputs[t].slot
    if not gap and C == 1:
        assert list(np.diff(run.accepted)) == cycles[:-1], \
            f"{where}: pairs accepted at {run.accepted}, rounds {cycles}"
    await replay(dut, cfg, run, where)
    return run.accs, cycles


async def replay(dut, cfg, run, where: str) -> None:
    """Drive the inputs of a :func:`fmac_cycles` run and compare every cycle's outputs with
    the model's."""
    for t, (item, want) in enumerate(zip(run.inputs, run.outputs)):
        if item is None:
            dut.grp__valid.value = 0
        else:
            dut.grp__payload.value = payload(cfg, *item)
            dut.grp__valid.value = 1
        await ReadOnly()
        got = (uint(dut.grp__ready), uint(dut.busy), uint(dut.last), uint(dut.error))
        exp = (int(want.ready), int(want.busy), int(want.last), int(want.error))
        assert got == exp, (f"{where}: cycle {t}: ready/busy/last/error {got}, model {exp} "
                            f"(pipeline {cfg.pipeline})")
        if cfg.contexts > 1:
            got = (uint(dut.slot), uint(dut.acc_slot))
            assert got == (want.slot, want.acc_slot), \
                f"{where}: cycle {t}: slot/acc_slot {got}, model {(want.slot, want.acc_slot)}"
        acc = uint(dut.acc)
        assert acc == want.acc, (f"{where}: cycle {t}: acc {acc:#010x}, model {want.acc:#010x} "
                                 f"(pipeline {cfg.pipeline}, contexts {cfg.contexts}; pairs "
                                 f"accepted at {run.accepted})")
        await FallingEdge(dut.clk)
    dut.grp__valid.value = 0


async def start_fmac(dut, cfg) -> None:
    """Start the clock and reset.  With ``contexts > 1``, first a few cycles of pairs (not
    checked) and a second reset: an idle interleaved loop feeds its adder the same constants,
    and Icarus evaluates a combinational block only when one of its inputs changes."""
    await start(dut)
    if cfg.contexts == 1:
        return
    dut.grp__payload.value = payload(cfg, _group(cfg, 127, [3] * cfg.group), 2,
                                     _group(cfg, 128, [1] * cfg.group), 2, 1)
    dut.grp__valid.value = 1
    for _ in range(3 * cfg.contexts + cfg.pipeline):
        await FallingEdge(dut.clk)
    dut.grp__valid.value = 0
    await reset(dut)


def _group(cfg, Es, q, signs=None):
    q = list(q) + [0] * (cfg.group - len(q))
    return (Es, list(signs or [0] * cfg.group), q)


def random_pair(cfg, gen, mx, my, clear):
    def operand(m):
        kind = gen.integers(0, 4)
        Es = int(gen.choice([0, 1, 2, 60, 127, 128, 200, 253, 254]) if kind == 0
                 else gen.integers(100, 150))
        q = gen.integers(0, 1 << m, cfg.group)
        if kind == 1:
            q[gen.random(cfg.group) < 0.5] = 0
        if kind == 2:
            q[:] = (1 << m) - 1
        return (Es, gen.integers(0, 2, cfg.group).tolist(), q.tolist())

    return (operand(mx), mx, operand(my), my, clear)


def widths(cfg):
    return [m for m in FMAC_WIDTHS if m <= cfg.m_max]


@cocotb.test()
async def spec_vectors(dut):
    """T11 (2x2: 16 x 3 x 3 at Es 127 = 36.0, one cycle), T14 (4x4: 16 x 15 x 15 -> 56.25,
    four cycles), T15 (a P = 0 round leaves the accumulator; FTZ; overflow to +Inf) and T16
    (every width pair takes (mx/2)(my/2) cycles)."""
    cfg = config_from_env(FMACConfig)
    await start_fmac(dut, cfg)
    sim = fmac_sim(cfg)
    ones = [0] * cfg.group
    pairs = [(_group(cfg, 127, [3] * cfg.group), 2, _group(cfg, 127, [3] * cfg.group), 2, 1)]
    if cfg.m_max >= 4:
        pairs.append((_group(cfg, 127, [15] * cfg.group), 4, _group(cfg, 127, [15] * cfg.group),
                      4, 1))
    pairs += [
        (_group(cfg, 127, ones), 2, _group(cfg, 127, [3] * cfg.group), 2, 0),     # P = 0
        (_group(cfg, 60, [1]), 2, _group(cfg, 60, [1]), 2, 1),                   # FTZ
        (_group(cfg, 254, [3] * cfg.group), 2, _group(cfg, 254, [3] * cfg.group), 2, 1),  # Inf
    ]
    accs, cycles = await stream(dut, cfg, sim, pairs, "spec vectors")
    if cfg.group == 16:
        assert accs[0].view(np.uint32) == 0x42100000 and cycles[0] == 1
        if cfg.m_max >= 4:
            assert accs[1] == np.float32(56.25) and cycles[1] == 4
    assert accs[-2].view(np.uint32) == 0 and np.isinf(accs[-1])
    for mx in widths(cfg):
        for my in widths(cfg):
            pair = random_pair(cfg, np.random.default_rng(mx * 10 + my), mx, my, 1)
            _, c = await stream(dut, cfg, sim, [pair], f"T16 ({mx}, {my})")
            assert c == [rounds(mx, my)]


@cocotb.test()
async def random_dot_products(dut):
    """The unit's test size (``TRAINFAB_TEST_SIZE``) in random group pairs *per (mx, my)
    combination* the configuration allows, in random order, chained into dot
    products of 1-6 pairs; the first half back to back, the second with random idle cycles."""
    cfg = config_from_env(FMACConfig)
    await start_fmac(dut, cfg)
    r = rng("random_dot_products")
    gen = np.random.default_rng(r.getrandbits(64))
    ws = widths(cfg)
    combos = [(a, b) for a in ws for b in ws] * test_size()
    order = gen.permutation(len(combos))
    pairs = []
    left = 0
    for k in order:
        clear = left == 0
        if clear:
            left = int(gen.integers(1, 7))
        left -= 1
        pairs.append(random_pair(cfg, gen, *combos[k], clear))
    counts = {}
    for p in pairs:
        counts[(p[1], p[3])] = counts.get((p[1], p[3]), 0) + 1
    assert counts == {c: test_size() for c in set(combos)}, counts
    # the second half starts a dot product (fmac_run starts each run from +0)
    half = next(k for k in range(len(pairs) // 2, len(pairs) + 1) if k == len(pairs)
                or pairs[k][4])
    sim = fmac_sim(cfg)
    await stream(dut, cfg, sim, pairs[:half], "random, back to back")
    if half < len(pairs):
        await stream(dut, cfg, sim, pairs[half:], "random, idle cycles", r, gap=0.2)


@cocotb.test()
async def width_above_m_max_sets_error(dut):
    """A pair asking for more bits than the operand registers hold sets the sticky error at the
    edge that takes it, and runs at ``m_max``, cycle by cycle with the model."""
    cfg = config_from_env(FMACConfig)
    await start_fmac(dut, cfg)
    assert uint(dut.error) == 0
    if cfg.m_max == 8:
        return
    ok = (_group(cfg, 127, [1]), 2, _group(cfg, 127, [3]), 2, 1)
    wide = (_group(cfg, 127, [1, (1 << cfg.m_max) - 1]), 8, _group(cfg, 130, [3, 2]), 2, 0)
    run = fmac_cycles(cfg, [ok, wide, ok])
    assert [o.error for o in run.outputs[:run.accepted[1] + 2]] == \
        [False] * (run.accepted[1] + 1) + [True]
    await replay(dut, cfg, run, "width above m_max")
    assert uint(dut.error) == 1


def power_width(cfg) -> int:
    """The mantissa width of both operands in power runs: FAST's 4 bits, or ``m_max`` when
    the operand registers hold fewer."""
    return min(cfg.m_max, 4)


@power_test
async def power_run(dut):
    """``trainfab power``: the bf16 operand groups ``a``/``b`` (groups, group) converted, each
    group on each side, into FAST's BFP (:func:`golden.fast.numerics.bfp_quantize_groups`, the
    converter's quantizer with deterministic rounding, ``"trunc"``: the shared exponent of the
    group's largest element, sign-magnitude mantissas truncated to ``mx = my = min(m_max, 4)``
    bits), the pairs ``(a[g], b[g])`` driven back to back as fast as the fMAC takes them
    (``rounds(mx, my)`` cycles each, no idle cycle), ``clear`` on the first pair of every
    ``dot_groups``; every cycle's outputs checked against the cycle model and every pair's
    result against :func:`fmac_run`.  The measured window covers the stream until the last
    result is in the accumulator."""
    cfg = config_from_env(FMACConfig)
    await start_fmac(dut, cfg)
    A, B, dot = group_operands(cfg.group)
    groups = A.shape[0]
    m = power_width(cfg)
    xs, ys = (bfp_quantize_groups(bf16_to_float(v), m, "trunc") for v in (A, B))
    pairs = [((int(xs[0][g]), xs[1][g].tolist(), xs[2][g].tolist()), m,
              (int(ys[0][g]), ys[1][g].tolist(), ys[2][g].tolist()), m, g % dot == 0)
             for g in range(groups)]
    window = PowerWindow(dut)
    accs, cycles = await stream(dut, cfg, fmac_sim(cfg), pairs, "power run")
    assert len(accs) == groups
    window.close(groups=groups, busy_cycles=int(sum(cycles)), mantissa_bits=m,
                 dot_products=groups // dot)
