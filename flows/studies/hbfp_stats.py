"""HBFP quantization error of tensor files (``trainfab tensor-stats --analysis hbfp``): the
RRMSE of every tensor against its FP32 values, and the storage per value."""

import time

from .. import FlowError
from . import tensors


def hbfp_stats(path, *, m: int = 8, block: int = 64, rounding: str = "floor",
               progress=None) -> dict:
    """How well every tensor of a file survives HBFP quantization (spec §1.3-§1.5).

    The tensor's values, in storage order, are cut into blocks of ``block`` (the last one padded
    with zeros; with ``block`` dividing the last dimension these are row segments, the
    activations' blocking, A8), each quantized to ``m``-bit mantissas with ``rounding``
    (``floor``, ``rne`` or ``rtz``).  Per tensor and in total: the RRMSE against the FP32 values
    (the thesis's error metric, §1.11), the share of non-zero values that became zero, and the
    storage in bits per value (``m + 8 / block``) and its ratio to FP32.  Non-finite values are
    an error (A7).  Tensors are streamed in chunks, so memory stays bounded.
    """
    import numpy as np

    from golden.equinox.hbfp import ROUNDINGS, HBFPInputError, bfp_dequantize, bfp_quantize

    from golden.equinox.hbfp import M_RANGE

    if isinstance(m, bool) or not isinstance(m, int) or not M_RANGE[0] <= m <= M_RANGE[1]:
        raise FlowError(f"--hbfp-m {m!r} is invalid: allowed an integer in "
                        f"{M_RANGE[0]}..{M_RANGE[1]}")
    if isinstance(block, bool) or not isinstance(block, int) or not 1 <= block <= 1 << 16:
        raise FlowError(f"--hbfp-block {block!r} is invalid: allowed an integer in 1..65536")
    if rounding not in ROUNDINGS[:3]:
        raise FlowError(f"--hbfp-rounding {rounding!r} is invalid: allowed floor, rne or rtz")
    start = time.monotonic()
    rows = []
    for tensor in tensors.read_tensors(path):
        err2 = ref2 = 0.0
        nonzero = zeroed = 0
        size = block * 65536
        for k, chunk in enumerate(tensor.chunks(size)):
            x = (chunk.astype(np.uint32) << 16).view(np.float32) if tensor.fmt == "bf16" else \
                chunk.view(np.float32)
            pad = -x.size % block
            xb = np.concatenate([x, np.zeros(pad, np.float32)]).reshape(-1, block)
            try:
                e, M = bfp_quantize(xb, m, rounding)
            except HBFPInputError as exc:
                where = f", in the chunk of values from {k * size}" if k else ""
                raise FlowError(f"{path}: tensor {tensor.name!r}{where}: {exc}") from None
            ref = xb.astype(np.float64)
            err2 += float(((ref - bfp_dequantize(e, M, m)) ** 2).sum())
            ref2 += float((ref ** 2).sum())
            nz = ref != 0
            nonzero += int(nz.sum())
            zeroed += int((nz & (M == 0)).sum())
            if progress:
                progress(tensor.name, min((k + 1) * size, tensor.count), tensor.count)
        rows.append({"name": tensor.name, "shape": list(tensor.shape), "format": tensor.fmt,
                     "values": tensor.count, "err2": err2, "ref2": ref2, "nonzero": nonzero,
                     "zeroed": zeroed})
    total = {"name": "total", "values": sum(r["values"] for r in rows)}
    for key in ("err2", "ref2", "nonzero", "zeroed"):
        total[key] = sum(r[key] for r in rows)
    for r in rows + [total]:
        r["rrmse"] = (r["err2"] / r["ref2"]) ** 0.5 if r["ref2"] else 0.0
        r["zeroed_share"] = r["zeroed"] / r["nonzero"] if r["nonzero"] else 0.0
    seconds = time.monotonic() - start
    return {"file": str(path), "m": m, "block": block, "rounding": rounding,
            "bits_per_value": m + 8 / block, "ratio_to_fp32": (m + 8 / block) / 32,
            "tensors": rows, "total": total, "seconds": round(seconds, 3)}


def hbfp_markdown(s: dict) -> str:
    head = ("| tensor | values | RRMSE vs FP32 | non-zero values flushed to 0 |\n"
            "|---|---|---|---|")
    lines = [f"# HBFP quantization of {s['file']} (m = {s['m']}, blocks of {s['block']}, "
             f"{s['rounding']})", "",
             f"Storage: {s['bits_per_value']:.3f} bits per value, {s['ratio_to_fp32']:.3f} of "
             "FP32.", "", head]
    for r in s["tensors"] + ([s["total"]] if len(s["tensors"]) > 1 else []):
        lines.append(f"| {r['name']} | {r['values']} | {r['rrmse']:.3e} | "
                     f"{100 * r['zeroed_share']:.2f} % |")
    lines += ["", f"{s['total']['values']} values in {s['seconds']} s"]
    return "\n".join(lines) + "\n"


__all__ = ["hbfp_stats", "hbfp_markdown"]
