"""The Gecko footprint of tensor files (``trainfab tensor-stats --analysis gecko``): every
tensor's bits under mantissa truncation and Gecko exponent compression (spec §4.5, §4.6)."""

from .. import FlowError
from . import tensors


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

    return {"file": str(path), "man_width": man_width, "sign_en": sign_en, "lanes": lanes,
            **tensors.footprint_rows(
                path, chunk_size, measure,
                lambda tensor, fp: _stats_row(tensor, config(tensor), fp), _ADDITIVE,
                ("width_rows",), _with_ratios, progress)}


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
    lines += tensors.report_rows(s, line)
    return "\n".join(lines) + "\n"


__all__ = ["gecko_stats", "stats_markdown"]
