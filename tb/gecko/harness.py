"""Stream drivers and payload packing shared by the Gecko testbenches.

All streams are driven and sampled by one cycle loop: on the falling edge every source drives
its ``valid``/``payload`` (and any per-item extra ports) and every sink its ``ready``; then, in
``ReadOnly`` of the same time step (nothing changes until the next rising edge), each stream's
handshake is read and recorded.  A source holds an item until it is accepted (valid never
drops before ready).
"""

import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly

from golden.common import float_to_fp32
from golden.gecko import GeckoConfig

from ..common import uint

#: rows A and B of spec §8.11/§8.12
ROW_A = [1.0, 0.5, 0.25, 3.0, 0.125, 0.75, 1.5, 0.0]
ROW_B = [-0.1, 0.2, -0.3, 0.4, 8.0, -2.5, 0.0625, 0.001]
#: bit positions inside the decompressor command payload (CMD_LAYOUT order)
CMD_FIELDS = (("rows", 32), ("man_width", 5), ("sign_en", 1), ("fixed_en", 1), ("fixed_w", 3))


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


def unpack_row(payload: int, cfg: GeckoConfig) -> tuple[list[int], int]:
    lw = cfg.lane_width
    mask = (1 << lw) - 1
    return [(payload >> (lw * j)) & mask for j in range(cfg.lanes)], payload >> (lw * cfg.lanes) & 1


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
