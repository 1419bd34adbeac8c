"""Payload packing and random tensors shared by the Gecko testbenches (the stream drivers are
:mod:`tb.common.streams`)."""

import numpy as np

from golden.common import float_to_fp32
from golden.gecko.codec import (
    GeckoConfig, GeckoStream, compress, compressor_cycles, decompressor_cycles, exp_code,
)
from hdl.gecko import CMD_LAYOUT, META_LAYOUT, row_layout

from ..common import setup as common_setup, uint
from ..common.layouts import field, pack

#: rows A and B of spec §8.11/§8.12
ROW_A = [1.0, 0.5, 0.25, 3.0, 0.125, 0.75, 1.5, 0.0]
ROW_B = [-0.1, 0.2, -0.3, 0.4, 8.0, -2.5, 0.0625, 0.001]
#: the compressor's (and loopback's) sticky error outputs
ERRS = ("err_exp", "err_mag", "err_sign", "err_cfg")


async def setup(dut, name: str):
    """Start a Gecko test (:func:`tb.common.setup`): returns the unit's :class:`GeckoConfig`,
    the test's random generator and a NumPy generator seeded from it."""
    return await common_setup(dut, GeckoConfig, name)


def no_errors(dut) -> None:
    """No sticky error flag is set."""
    for e in ERRS:
        assert uint(getattr(dut, e)) == 0, f"{e} set without cause"


def spec_rows_ab(cfg: GeckoConfig) -> np.ndarray:
    """Rows A and B of spec §8.11/§8.12 in the unit's format (bf16 = top half of FP32)."""
    x = float_to_fp32(np.array(ROW_A + ROW_B, dtype=np.float32))
    return x if cfg.fmt == "fp32" else (x >> 16).astype(np.uint16)


def man_widths(cfg: GeckoConfig) -> tuple:
    """The man_width values the random tests cover (docs/specs/gecko.md §8.17)."""
    return (0, 1, 2, 3, 7, 23) if cfg.fmt == "fp32" else tuple(range(8))


def pack_row(words, last: int, cfg: GeckoConfig) -> int:
    """A row payload (lane words and ``last``) packed through the RTL's row layout."""
    return pack(row_layout(cfg), {"data": [int(w) for w in words], "last": int(last)})


def row_words(payload: int, cfg: GeckoConfig) -> list[int]:
    """The lane words of a row payload."""
    return field(row_layout(cfg), payload, "data")


def control(man_width: int, sign_en: bool, fixed_width) -> dict:
    """Side-band values of one tensor (:class:`hdl.common.signatures.SidebandSignature`
    fields: the compressor's ``ctl`` ports and the decompressor command's ``ctl``)."""
    return {"man_width": man_width, "sign_en": int(sign_en),
            "fixed_en": int(fixed_width is not None), "fixed_w": fixed_width or 0}


def ctl_ports(ctl: dict) -> dict:
    """Side-band values keyed by the compressor's port names (``ctl__man_width`` ...)."""
    return {f"ctl__{name}": value for name, value in ctl.items()}


def cfg_control(cfg: GeckoConfig) -> dict:
    """:func:`control` of a tensor configuration."""
    return control(cfg.man_width, cfg.sign_en, cfg.fixed_width)


def stream_payloads(s: GeckoStream) -> tuple[list[int], list[int]]:
    """A golden stream's word rows and metadata words as payload ints (``last`` on the final
    one of each)."""
    n = s.data.shape[0]
    data = [pack_row(s.data[q], q == n - 1, s.cfg) for q in range(n)]
    meta = [pack(META_LAYOUT, {"word": int(w), "last": int(q == s.meta.size - 1)})
            for q, w in enumerate(s.meta)]
    return data, meta


def completion_rows(bits: np.ndarray, cfg: GeckoConfig) -> list[int]:
    """For each word row of ``golden.gecko.codec.compress(bits, cfg)``, the input row that completes
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


class PortTrace:
    """The values of ``ports`` in every cycle of a stream run: pass it as
    :func:`tb.common.streams.run`'s ``check`` (it reads them in ``ReadOnly``).  A stream's
    ``<name>__payload`` is read only in the cycles its ``<name>__valid`` is high (``None``
    otherwise)."""

    def __init__(self, dut, ports):
        self.handles = [(name, getattr(dut, name),
                         name[:-len("payload")] + "valid" if name.endswith("__payload") else None)
                        for name in ports]
        self.cycles = []

    def __call__(self, cycle: int) -> None:
        values = {}
        for name, handle, valid in self.handles:
            values[name] = uint(handle) if valid is None or values[valid] else None
        self.cycles.append(values)

    def inputs(self, *ports) -> list[tuple]:
        """Per cycle, the values of ``ports`` (the stimulus a cycle model takes)."""
        return [tuple(c[p] for p in ports) for c in self.cycles]

    def expect(self, want: list[dict], what: str) -> None:
        """Every cycle's ports equal the cycle model's values (``None``: not compared)."""
        assert len(want) == len(self.cycles)
        for cycle, (got, exp) in enumerate(zip(self.cycles, want)):
            for port, value in exp.items():
                assert value is None or got[port] == value, (
                    f"cycle {cycle}: {port} = {got[port]:#x}, the cycle model of {what} "
                    f"expects {value:#x}")


#: the compressor's handshake ports (:func:`expect_compressor_cycles`)
COMPRESSOR_PORTS = ("i__valid", "i__ready", "o__valid", "o__ready", "o__payload", "meta__valid",
                    "meta__ready", "meta__payload")
#: the decompressor's handshake ports (:func:`expect_decompressor_cycles`)
DECOMPRESSOR_PORTS = ("cmd__valid", "cmd__ready", "i__valid", "i__ready", "meta__valid",
                      "meta__ready", "o__valid", "o__ready", "o__payload")


def _meta_payload(word) -> int:
    return pack(META_LAYOUT, {"word": word[0], "last": int(word[1])})


def expect_compressor_cycles(trace: PortTrace, cfg: GeckoConfig, tensors) -> None:
    """The compressor's ``i.ready``, ``o`` and ``meta`` in every traced cycle equal
    :func:`golden.gecko.codec.compressor_cycles` on the traced stimulus (so a word or a ready
    a cycle early or late fails)."""
    model = compressor_cycles(cfg, tensors, trace.inputs("i__valid", "o__ready", "meta__ready"))
    trace.expect([{
        "i__ready": int(c.i_ready), "o__valid": int(c.o is not None),
        "o__payload": None if c.o is None else pack_row(c.o[0], c.o[1], cfg),
        "meta__valid": int(c.meta is not None),
        "meta__payload": None if c.meta is None else _meta_payload(c.meta),
    } for c in model], f"the compressor (pipeline={cfg.pipeline})")


def expect_decompressor_cycles(trace: PortTrace, cfg: GeckoConfig, tensors) -> None:
    """The decompressor's ready outputs and ``o`` in every traced cycle equal
    :func:`golden.gecko.codec.decompressor_cycles` on the traced stimulus."""
    model = decompressor_cycles(cfg, tensors, trace.inputs("cmd__valid", "i__valid",
                                                           "meta__valid", "o__ready"))
    trace.expect([{
        "cmd__ready": int(c.cmd_ready), "i__ready": int(c.i_ready),
        "meta__ready": int(c.meta_ready), "o__valid": int(c.o is not None),
        "o__payload": None if c.o is None else pack_row(c.o[0], c.o[1], cfg),
    } for c in model], f"the decompressor (pipeline={cfg.pipeline})")


def pack_cmd(rows: int, ctl: dict) -> int:
    """A decompressor command payload: the tensor's row count and side-band values."""
    return pack(CMD_LAYOUT, {"rows": rows, "ctl": ctl})


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


def own_tensor(gen: np.random.Generator, n: int, cfg: GeckoConfig) -> np.ndarray:
    """A random tensor of ``n`` values that is legal at the configuration's own side-band
    values (signs only with ``sign_en``; magnitudes inside a fixed width)."""
    x = random_tensor(gen, n, cfg.format, cfg.sign_en)
    return x if cfg.fixed_width is None else fit_fixed_width(x, cfg.fixed_width, cfg.format)


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
