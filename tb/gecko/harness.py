"""Stream drivers, payload packing and random tensors shared by the Gecko testbenches.

All streams are driven and sampled by one cycle loop: on the falling edge every source drives
its ``valid``/``payload`` (and any per-item extra ports) and every sink its ``ready``; then, in
``ReadOnly`` of the same time step (nothing changes until the next rising edge), each stream's
handshake is read and recorded.  A source holds an item until it is accepted (valid never
drops before ready).
"""

import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly

from golden.common import float_to_fp32
from golden.gecko import GeckoConfig, GeckoStream, compress, exp_code

from ..common import uint

#: rows A and B of spec §8.11/§8.12
ROW_A = [1.0, 0.5, 0.25, 3.0, 0.125, 0.75, 1.5, 0.0]
ROW_B = [-0.1, 0.2, -0.3, 0.4, 8.0, -2.5, 0.0625, 0.001]
#: bit positions inside the decompressor command payload (CMD_LAYOUT order)
CMD_FIELDS = (("rows", 32), ("man_width", 5), ("sign_en", 1), ("fixed_en", 1), ("fixed_w", 3))
#: the compressor's (and loopback's) sticky error outputs
ERRS = ("err_exp", "err_mag", "err_sign", "err_cfg")


def spec_rows_ab(cfg: GeckoConfig) -> np.ndarray:
    """Rows A and B of spec §8.11/§8.12 in the unit's format (bf16 = top half of FP32)."""
    x = float_to_fp32(np.array(ROW_A + ROW_B, dtype=np.float32))
    return x if cfg.fmt == "fp32" else (x >> 16).astype(np.uint16)


def man_widths(cfg: GeckoConfig) -> tuple:
    """The man_width values the random tests cover (spec §8.17 plus the brief's list)."""
    return (0, 1, 2, 3, 7, 23) if cfg.fmt == "fp32" else tuple(range(8))


def pack_row(words, last: int, cfg: GeckoConfig) -> int:
    """Row payload: lane ``j`` at bits ``[lw*j + lw - 1 : lw*j]``, ``last`` above the data."""
    lw = cfg.lane_width
    v = 0
    for j, w in enumerate(words):
        v |= int(w) << (lw * j)
    return v | (int(last) << (lw * cfg.lanes))


def control(man_width: int, sign_en: bool, fixed_width) -> dict:
    """Side-band values of one tensor, keyed by the compressor's control ports (which are also
    the decompressor command's fields, so ``pack_cmd(rows=n, **control(...))`` is its command)."""
    return {"man_width": man_width, "sign_en": int(sign_en),
            "fixed_en": int(fixed_width is not None), "fixed_w": fixed_width or 0}


def cfg_control(cfg: GeckoConfig) -> dict:
    """:func:`control` of a tensor configuration."""
    return control(cfg.man_width, cfg.sign_en, cfg.fixed_width)


def stream_payloads(s: GeckoStream) -> tuple[list[int], list[int]]:
    """A golden stream's word rows and metadata words as payload ints (``last`` on the final
    one of each)."""
    n = s.data.shape[0]
    data = [pack_row(s.data[q], q == n - 1, s.cfg) for q in range(n)]
    meta = [int(w) | (int(q == s.meta.size - 1) << 32) for q, w in enumerate(s.meta)]
    return data, meta


def completion_rows(bits: np.ndarray, cfg: GeckoConfig) -> list[int]:
    """For each word row of ``golden.gecko.compress(bits, cfg)``, the input row that completes
    it: the first row whose golden prefix stream holds that many whole lane words (its
    ``field_bits`` reach the word's end); the final, flushed word belongs to the last row."""
    n_words = compress(bits, cfg).data.shape[0]
    rows = -(-bits.size // cfg.lanes)
    out = []
    for r in range(rows):
        if r == rows - 1:
            whole = n_words
        else:
            prefix = compress(bits[:(r + 1) * cfg.lanes], cfg)
            whole = prefix.footprint().field_bits // cfg.lane_width
        out += [r] * (whole - len(out))
    return out


def pack_cmd(**kw) -> int:
    v, pos = 0, 0
    for name, width in CMD_FIELDS:
        value = int(kw.get(name, 0))
        assert 0 <= value < (1 << width), f"command field {name}={value} does not fit {width} bits"
        v |= value << pos
        pos += width
    return v


def rows_of(bits: np.ndarray, cfg: GeckoConfig) -> list[list[int]]:
    """Input rows of a tensor, the last one padded with +0.0 (A9)."""
    vals = [int(v) for v in bits] + [0] * (-bits.size % cfg.lanes)
    return [vals[i:i + cfg.lanes] for i in range(0, len(vals), cfg.lanes)]


def random_tensor(gen: np.random.Generator, n: int, cfg_fmt, sign: bool) -> np.ndarray:
    """Finite values: a mix of training-like exponents (small widths) and every exponent 0..254,
    with zeros and subnormals."""
    m = cfg_fmt.man_bits
    kind = gen.integers(0, 3)
    if kind == 0:          # clustered near the bias, as in training tensors
        E = np.clip(127 + gen.integers(-5, 3, n), 1, 254)
    elif kind == 1:        # wider spread
        E = np.clip(127 + gen.integers(-60, 60, n), 1, 254)
    else:                  # every exponent
        E = gen.integers(0, 255, n)
    E = np.where(gen.random(n) < 0.15, 0, E)
    man = gen.integers(0, 1 << m, n)
    s = gen.integers(0, 2, n) if sign else np.zeros(n, dtype=np.int64)
    return ((s << (cfg_fmt.width - 1)) | (E << m) | man).astype(cfg_fmt.dtype)


def fit_fixed_width(bits: np.ndarray, fixed_width: int, fmt) -> np.ndarray:
    """``bits`` with every value whose exponent magnitude does not fit ``fixed_width`` bits
    replaced by +0.0 (so the tensor is legal in fixed-width mode, §4.7)."""
    e = (bits.astype(np.int64) >> fmt.man_bits) & 0xFF
    fits = exp_code(e)[1] < (1 << fixed_width)
    return np.where(fits, bits, 0).astype(bits.dtype)


def required_pairs(cfg: GeckoConfig) -> list[tuple[int, bool]]:
    """Every (man_width, sign_en) pair the random tests must cover."""
    return [(mw, sign_en) for mw in man_widths(cfg) for sign_en in (False, True)]


def random_plan(gen: np.random.Generator, cfg: GeckoConfig, target_rows: int, max_rows: int,
                pair_rows: int, fixed: bool = True) -> list[tuple[np.ndarray, GeckoConfig]]:
    """Random ``(bits, tensor config)`` tensors of at least ``target_rows`` rows in all.

    Every (man_width, sign_en) pair of :func:`required_pairs` gets one Gecko-mode tensor and,
    with ``fixed``, one fixed-width tensor (the fixed widths cycle through 0..7), each of up to
    ``pair_rows`` rows; random tensors of up to ``max_rows`` rows (a fifth of them fixed-width
    when ``fixed``) then fill up to ``target_rows``.  The list is shuffled, so Gecko-mode and
    fixed-width tensors of different side-band values follow each other back to back.
    """
    fmt = cfg.format

    def tensor(mw, sign_en, fw, rows):
        x = random_tensor(gen, int(gen.integers(1, rows * cfg.lanes + 1)), fmt, sign_en)
        if fw is not None:
            x = fit_fixed_width(x, fw, fmt)
        return x, GeckoConfig(lanes=cfg.lanes, fmt=cfg.fmt, man_width=mw, sign_en=sign_en,
                              fixed_width=fw)

    plan = []
    for k, (mw, sign_en) in enumerate(required_pairs(cfg)):
        plan.append(tensor(mw, sign_en, None, pair_rows))
        if fixed:
            plan.append(tensor(mw, sign_en, k % 8, pair_rows))
    rows = plan_rows(plan, cfg.lanes)
    while rows < target_rows:
        fw = int(gen.integers(0, 8)) if fixed and gen.random() < 0.2 else None
        plan.append(tensor(int(gen.choice(man_widths(cfg))), bool(gen.integers(0, 2)), fw,
                           max_rows))
        rows += -(-plan[-1][0].size // cfg.lanes)
    return [plan[i] for i in gen.permutation(len(plan))]


def plan_rows(plan, lanes: int) -> int:
    """Input rows of a list of ``(bits, cfg)`` tensors."""
    return sum(-(-x.size // lanes) for x, _ in plan)


class Source:
    """Drives ``<name>__valid``/``<name>__payload`` from a list of items.

    Each item is ``(payload, extra)`` where ``extra`` maps further port names to values driven
    with the item (the compressor samples its control inputs with each row).  ``gap`` is the
    probability of idling instead of offering the next item.
    """

    def __init__(self, dut, name: str, items, rnd, gap: float = 0.0):
        self.valid = getattr(dut, f"{name}__valid")
        self.payload = getattr(dut, f"{name}__payload")
        self.ready = getattr(dut, f"{name}__ready")
        self.dut = dut
        self.items = list(items)
        self.rnd = rnd
        self.gap = gap
        self.offering = False
        self.accepted_cycles = []
        self.valid.value = 0

    def drive(self) -> None:
        if not self.offering and self.items and self.rnd.random() >= self.gap:
            payload, extra = self.items[0]
            self.payload.value = payload
            for port, value in extra.items():
                getattr(self.dut, port).value = value
            self.offering = True
        self.valid.value = int(self.offering)

    def sample(self, cycle: int) -> None:
        if self.offering and uint(self.ready):
            self.items.pop(0)
            self.offering = False
            self.accepted_cycles.append(cycle)

    @property
    def done(self) -> bool:
        return not self.items and not self.offering


class Sink:
    """Drives ``<name>__ready`` (high with probability ``p_ready``) and collects payloads."""

    def __init__(self, dut, name: str, rnd, p_ready: float = 1.0):
        self.valid = getattr(dut, f"{name}__valid")
        self.payload = getattr(dut, f"{name}__payload")
        self.ready = getattr(dut, f"{name}__ready")
        self.rnd = rnd
        self.p_ready = p_ready
        self.got = []
        self.cycles = []
        self._r = 0
        self.ready.value = 0

    def drive(self) -> None:
        self._r = int(self.rnd.random() < self.p_ready)
        self.ready.value = self._r

    def sample(self, cycle: int) -> None:
        if self._r and uint(self.valid):
            self.got.append(uint(self.payload))
            self.cycles.append(cycle)


async def run(dut, sources, sinks, done, max_cycles: int, check=None) -> int:
    """Cycle loop (call on a falling edge with reset released).  Runs until ``done()`` is true
    after a cycle; fails after ``max_cycles``.  ``check(cycle)`` runs in ReadOnly each cycle.
    Returns the number of cycles run; ends on a falling edge with the sources idle (unless an
    item is still offered) and the sinks not ready."""
    cycle = 0
    while True:
        for s in sources:
            s.drive()
        for k in sinks:
            k.drive()
        await ReadOnly()
        for s in sources:
            s.sample(cycle)
        for k in sinks:
            k.sample(cycle)
        if check is not None:
            check(cycle)
        cycle += 1
        await FallingEdge(dut.clk)
        if done():
            # stop offering and accepting, or the item accepted last would be sent again
            for s in sources:
                s.valid.value = int(s.offering)
            for k in sinks:
                k.ready.value = 0
            return cycle
        if cycle >= max_cycles:
            left = ", ".join(f"{len(x.items)} items left on {x.payload._name}" for x in sources)
            got = ", ".join(f"{len(k.got)} items from {k.payload._name}" for k in sinks)
            raise AssertionError(f"timed out after {max_cycles} cycles: {left}; {got}")
