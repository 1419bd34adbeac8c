"""Gecko / Schrödinger's FP (``docs/specs/gecko.md``): the exponent compressor and decompressor.

Declares the units, the paper's decompressor/compressor area ratio, the Gecko footprint
statistics of tensor files (``trainfab tensor-stats``) and their benchmark.
"""

import os
import time

from .. import FlowError
from ..studies import tensors
from ..bench import Bench
from ..registry import Unit
from ..report import Comparison
from ..studies.tensors import TensorAnalysis
from ..eda.timing import ClockTarget

ORDER = 30

#: every Gecko unit shares the configuration class, preset, effort sizes and small synthesis
_GECKO = dict(config="GeckoConfig", preset="gecko-paper",
              test_sizes={"quick": 600, "standard": 5000, "full": 50000},
              synth_overrides={"lanes": 2, "fmt": "bf16"},
              runtime_fields=("man_width", "sign_en", "fixed_width"))
#: a narrow, odd-lane fixed-width configuration every Gecko unit also regresses
_NARROW_FIXED = {"lanes": 3, "man_width": 5, "fixed_width": 4}
#: the register stages every Gecko unit also regresses: one stage (the depth that meets 200 MHz
#: in OSU 0.18 µm) on the small synthesis configuration, both on the narrow fixed-width one
_STAGED = ({"lanes": 2, "fmt": "bf16", "man_width": 7, "pipeline": 1},
           {**_NARROW_FIXED, "pipeline": 2})

UNITS = (
    Unit(name="gecko.compressor",
         summary="Gecko compressor: a row of FP32/bf16 values per cycle to lane words",
         component="GeckoCompressor",
         extra_configs=({"fmt": "bf16", "man_width": 3, "sign_en": False},
                        _NARROW_FIXED, *_STAGED),
         demo_config={"lanes": 2, "fmt": "bf16"},
         paper="31,575.60 µm² at 65 nm, 500 MHz", **_GECKO),
    Unit(name="gecko.decompressor",
         summary="Gecko decompressor: lane words + metadata to a row of values per cycle",
         component="GeckoDecompressor",
         extra_configs=({"fmt": "bf16", "man_width": 2}, _NARROW_FIXED, *_STAGED),
         demo_config={"lanes": 2, "fmt": "bf16"},
         paper="37,133.28 µm² at 65 nm, 500 MHz", **_GECKO),
    Unit(name="gecko.loopback",
         summary="Gecko compressor feeding a decompressor (end-to-end check)",
         component="GeckoLoopback",
         extra_configs=({"fmt": "bf16", "man_width": 4}, _NARROW_FIXED, _STAGED[1]),
         **_GECKO),
)

COMPARISONS = (
    Comparison(label="Gecko decompressor / compressor", numerator="gecko.decompressor",
               denominator="gecko.compressor", paper_ratio=37133.28 / 31575.60,
               source="Schrödinger's FP Table III: 37,133.28 vs 31,575.60 µm² (65 nm, 500 MHz)"),
)


# --------------------------------------------------------------------------------------------
# Gecko footprint statistics of a tensor file


def gecko_stats(path, *, man_width: int | None = None, sign_en: bool = True, lanes: int = 8,
                progress=None) -> dict:
    """Footprint of every tensor of a file under mantissa truncation and Gecko compression.

    Per tensor and in total: FP32 bits (32 per value), bits after truncating the mantissa to
    ``man_width`` (sign + 8 exponent bits + ``man_width``), Gecko's exact stored bits (lane
    words + metadata words, spec §4.5), the paper-style cost (§4.6: per row 3 + lanes·w_lit
    exponent bits, plus sign and mantissa bits per value), the ratios of each to FP32, and the
    share of rows per exponent width 0..7 (the paper's Fig. 5b view).  ``man_width=None`` keeps
    each format's full mantissa (Gecko alone is lossless).  Tensors are streamed in chunks of
    :data:`flows.studies.tensors.CHUNK_ROWS` rows, so memory stays bounded.
    """
    from golden import ConfigError
    from golden.gecko.codec import GeckoConfig, footprint

    def config(tensor):
        try:
            return GeckoConfig(lanes=lanes, fmt=tensor.fmt, man_width=man_width, sign_en=sign_en)
        except ConfigError as e:
            raise FlowError(f"{path}: tensor {tensor.name!r} ({tensor.fmt}): {e}") from None

    size = tensors.CHUNK_ROWS * lanes

    def measure(tensor, chunk, k):
        try:
            return footprint(chunk, config(tensor))
        except ValueError as e:
            where = f", in the chunk of values from {k * size}" if k else ""
            raise FlowError(f"{path}: tensor {tensor.name!r}{where}: {e}") from None

    def chunk_size(tensor):
        config(tensor)  # a tensor the codec cannot take stops the run before it is read
        return size

    rows_out, total, seconds = tensors.footprint_rows(
        path, chunk_size, measure,
        lambda tensor, fp: _stats_row(tensor, config(tensor), fp), _ADDITIVE, ("width_rows",),
        progress)
    total = _with_ratios(total)
    values = total["values"]
    return {"file": str(path), "man_width": man_width, "sign_en": sign_en, "lanes": lanes,
            "tensors": rows_out, "total": total, "seconds": round(seconds, 3),
            "values_per_second": round(values / seconds) if seconds > 0 else None}


_ADDITIVE = ("values", "fp32_bits", "truncated_bits", "gecko_bits", "paper_bits", "rows")


def _stats_row(tensor, cfg, fp) -> dict:
    n = tensor.count
    sign = int(cfg.sign_en)
    hist = [int(h) for h in fp.width_hist] if fp is not None else [0] * 8
    row = {
        "name": tensor.name, "shape": list(tensor.shape), "format": tensor.fmt,
        "source_dtype": tensor.source_dtype, "man_width": cfg.man_width,
        "values": n,
        "fp32_bits": 32 * n,
        "truncated_bits": n * (sign + cfg.format.exp_bits + cfg.man_width),
        "gecko_bits": fp.total_bits if fp is not None else 0,
        "paper_bits": (fp.exp_bits_lit + n * (sign + cfg.man_width)) if fp is not None else 0,
        "rows": fp.rows if fp is not None else 0,
        "width_rows": hist,
    }
    return _with_ratios(row)


def _with_ratios(row: dict) -> dict:
    """Ratios to FP32 and the shares of rows per width; ``None`` for a tensor without values
    (an empty one), whose report says "no values"."""
    base = row["fp32_bits"]
    for key in ("truncated", "gecko", "paper"):
        row[f"{key}_ratio"] = row[f"{key}_bits"] / base if base else None
    rows = row["rows"]
    row["width_share"] = [h / rows for h in row["width_rows"]] if rows else None
    return row


def stats_markdown(s: dict) -> str:
    head = ("| tensor | values | FP32 bits | truncated | Gecko exact | paper-style | rows with "
            "exponent width 0..7 (%) |\n|---|---|---|---|---|---|---|")
    def line(r):
        if not r["values"]:
            return f"| {r['name']} | 0 | no values (an empty tensor) | | | | |"
        shares = " ".join(f"{100 * x:.0f}" for x in r["width_share"])
        return (f"| {r['name']} | {r['values']} | {r['fp32_bits']} | {r['truncated_bits']} "
                f"({r['truncated_ratio']:.3f}) | {r['gecko_bits']} ({r['gecko_ratio']:.3f}) | "
                f"{r['paper_bits']} ({r['paper_ratio']:.3f}) | {shares} |")
    mw = "full mantissa" if s["man_width"] is None else f"man_width={s['man_width']}"
    lines = [f"# Gecko footprint of {s['file']} ({mw}, sign_en={s['sign_en']}, "
             f"{s['lanes']} lanes)", "", "Bits, with the ratio to FP32 in brackets.", "", head]
    lines += [line(r) for r in s["tensors"]]
    if s["total"] and len(s["tensors"]) > 1:
        lines.append(line(s["total"]))
    rate = s["values_per_second"]
    lines += ["", f"{s['total']['values'] if s['total'] else 0} values in {s['seconds']} s"
              + (f" ({rate * 60 / 1e6:.0f} million values per minute)" if rate else "")]
    return "\n".join(lines) + "\n"


def _bounded(lo: int, hi: int):
    """``--lanes``/``--man-width``: an integer in ``lo..hi`` (:func:`flows.cli.bounded`, imported
    when an option is parsed: the CLI imports this module while it builds its parser)."""
    def parse(text):
        from ..cli import bounded

        return bounded(int, lo, hi)(text)

    parse.__name__ = "an integer"
    return parse


TENSOR_ANALYSES = (
    TensorAnalysis(
        name="gecko", summary="footprint under mantissa truncation and Gecko exponent compression",
        run=gecko_stats, markdown=stats_markdown, default=True,
        options=((("--man-width",), {"dest": "man_width", "type": _bounded(0, 23), "default": None,
                                     "help": "mantissa bits kept, 0 to 23 for FP32 and 0 to 7 "
                                             "for bf16 tensors (default: the format's full "
                                             "mantissa)"}),
                 (("--no-sign",), {"dest": "sign_en", "action": "store_false",
                                   "help": "sign_en=false (non-negative tensors)"}),
                 (("--lanes",), {"dest": "lanes", "type": _bounded(1, 64), "default": 8,
                                  "help": "values per row, 1 to 64 (default 8)"}))),
)


# --------------------------------------------------------------------------------------------
# benchmark

def _bench_file_ok(path, n: int) -> bool:
    """Whether a cached bench tensor is a whole ``.npy`` of ``n`` float32 values."""
    import numpy as np

    try:
        with open(path, "rb") as f:
            np.lib.format.read_magic(f)
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            data_start = f.tell()
        return (shape == (n,) and dtype == np.float32
                and os.path.getsize(path) == data_start + 4 * n)
    except (OSError, ValueError):
        return False


def bench_gecko(n: int = 25_000_000, seed: int = 0) -> dict:
    """Throughput of ``trainfab tensor-stats`` on a generated FP32 ``.npy`` tensor of ``n`` values.

    The tensor (N(0, 0.02), like trained weights) is written under ``build/bench`` and read back
    in chunks exactly as the command does; the golden ``compress`` speed is measured on 1 M values.
    """
    import numpy as np

    from golden.gecko.codec import GeckoConfig, compress

    from .. import build_dir
    from ..runs import ensure_dir

    rng = np.random.default_rng(seed)
    out = ensure_dir(build_dir() / "bench", "bench data folder")
    path = out / f"normal_{n}.npy"
    if not _bench_file_ok(path, n):  # missing, or damaged (truncated, overwritten): rewrite it
        values = (rng.standard_normal(n) * 0.02).astype(np.float32)
        tmp = out / f".{path.name}.{os.getpid()}"
        with open(tmp, "wb") as f:
            np.save(f, values)
        os.replace(tmp, path)
    t0 = time.perf_counter()
    stats = gecko_stats(path, man_width=7)
    t1 = time.perf_counter()
    bits = (rng.standard_normal(1_000_000) * 0.02).astype(np.float32).view(np.uint32)
    t2 = time.perf_counter()
    compress(bits, GeckoConfig(man_width=7))
    t3 = time.perf_counter()
    return {"values": n, "file_mb": path.stat().st_size / 1e6,
            "stats_values_per_min": n / (t1 - t0) * 60,
            "gecko_ratio": stats["total"]["gecko_ratio"],
            "compress_values_per_s": bits.size / (t3 - t2)}


def gecko_table(scale: int = 1, seed: int = 0) -> str:
    """``trainfab bench``'s Gecko table."""
    g = bench_gecko(n=25_000_000 // scale, seed=seed)
    return (f"| Gecko | value |\n|---|---|\n"
            f"| tensor-stats on a {g['file_mb']:.0f} MB FP32 .npy ({g['values']:,} values) | "
            f"{g['stats_values_per_min'] / 1e6:,.0f} million values/min |\n"
            f"| golden compress() | {g['compress_values_per_s'] / 1e6:.1f} million values/s |\n"
            f"| Gecko footprint at man_width=7 / FP32 | {g['gecko_ratio']:.3f} |")


BENCHES = (
    Bench(name="gecko", summary="tensor-stats throughput and golden compress() speed",
          run=gecko_table),
)

#: the configurations that close the Gecko units' timing (``trainfab timing``)
TIMING = tuple(
    ClockTarget(unit=f"gecko.{name}", overrides={"pipeline": 1}, note="one register stage")
    for name in ("compressor", "decompressor", "loopback")
)

__all__ = ["UNITS", "TIMING", "COMPARISONS", "TENSOR_ANALYSES", "BENCHES", "gecko_stats",
           "stats_markdown", "bench_gecko", "gecko_table"]
