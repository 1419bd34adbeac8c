"""FPRaker base-delta compression (BDC) footprint of tensor files
(``trainfab tensor-stats --analysis bdc``; spec ``docs/specs/fpraker.md`` §7).

Each tensor is compressed as FPRaker writes it off chip: bfloat16 values in storage order, cut
into groups of ``group`` (32 in the paper), each group one header, one base exponent and per
value 8 bits of sign and mantissa plus a delta (:func:`golden.fpraker.bdc.footprint`).  FP32
tensors are first rounded to bfloat16 (round to nearest even), the format FPRaker stores;
bfloat16 tensors (training captures) are measured as they are.  The report gives, per tensor
and in total, the stream bits, bits per value, the ratio to bfloat16 (16 bits per value), the
share of groups per header (delta width 0..6, escape) and the escape share.
"""

from .. import FlowError
from ..options import bounded
from . import tensors

#: values per chunk of a tensor read: about a million, a whole number of groups
CHUNK_VALUES = 1 << 20
#: the group sizes the analysis takes (those of :class:`golden.fpraker.bdc.BDCConfig`)
GROUP_RANGE = (2, 64)

_ADDITIVE = ("values", "bf16_bits", "bdc_bits", "exp_bits", "groups")


def bdc_stats(path, *, group: int = 32, progress=None) -> dict:
    """The BDC footprint of every tensor of a file, and of all of them.

    Parameters
    ----------
    path : path
        A ``.npy``, ``.npz`` or ``.safetensors`` file (:func:`flows.studies.tensors.read_tensors`).
    group : int
        Values per group, 2..64 (the paper's 32).
    progress : callable, optional
        ``progress(tensor_name, values_done, values_total)``.

    Returns
    -------
    dict
        ``{"file", "group", "tensors": [row], "total": row, "seconds", "values_per_second"}``;
        a row holds ``values``, ``bf16_bits``, ``bdc_bits`` (the stream, before padding to a
        word), ``exp_bits``, ``groups``, ``header_groups`` (groups per header 0..7, 7 = escape),
        and, unless the tensor is empty, ``bits_per_value``, ``ratio`` (to bfloat16),
        ``header_share`` and ``escape_share`` (``None`` for an empty tensor).
    """
    from golden import ConfigError
    from golden.common import fp32_to_bf16_rne
    from golden.fpraker.bdc import BDCConfig, footprint

    try:
        cfg = BDCConfig(group=group)
    except ConfigError as e:
        raise FlowError(str(e)) from None
    size = group * (CHUNK_VALUES // group)

    def measure(tensor, chunk, k):
        return footprint(chunk if tensor.fmt == "bf16" else fp32_to_bf16_rne(chunk), cfg)

    return {"file": str(path), "group": group, **tensors.footprint_rows(
        path, lambda tensor: size, measure, _row, _ADDITIVE, ("header_groups",), _with_ratios,
        progress)}


def _row(tensor, fp) -> dict:
    row = {"name": tensor.name, "shape": list(tensor.shape), "format": tensor.fmt,
           "source_dtype": tensor.source_dtype, "values": tensor.count,
           "bf16_bits": 16 * tensor.count,
           "bdc_bits": fp.bits if fp is not None else 0,
           "exp_bits": fp.exp_bits if fp is not None else 0,
           "groups": fp.groups if fp is not None else 0,
           "header_groups": [int(h) for h in fp.header_hist] if fp is not None else [0] * 8}
    return _with_ratios(row)


def _with_ratios(row: dict) -> dict:
    n, g = row["values"], row["groups"]
    row["bits_per_value"] = row["bdc_bits"] / n if n else None
    row["ratio"] = row["bdc_bits"] / row["bf16_bits"] if n else None
    row["header_share"] = [h / g for h in row["header_groups"]] if g else None
    row["escape_share"] = row["header_groups"][7] / g if g else None
    return row


def bdc_markdown(s: dict) -> str:
    """The report of :func:`bdc_stats`."""
    head = ("| tensor | values | bf16 bits | BDC bits | bits/value | BDC / bf16 | groups with "
            "header 0..6, escape (%) | escape |\n|---|---|---|---|---|---|---|---|")

    def line(r):
        if not r["values"]:
            return f"| {r['name']} | 0 | no values (an empty tensor) | | | | | |"
        shares = " ".join(f"{100 * x:.0f}" for x in r["header_share"])
        return (f"| {r['name']} | {r['values']} | {r['bf16_bits']} | {r['bdc_bits']} | "
                f"{r['bits_per_value']:.3f} | {r['ratio']:.3f} | {shares} | "
                f"{100 * r['escape_share']:.1f} % |")

    lines = [f"# FPRaker base-delta compression of {s['file']} (groups of {s['group']})", "",
             "Stream bits per tensor (spec §7: per group 3 + 8 + 8 n + (n - 1) δ bits, δ = 8 "
             "for the escape); FP32 tensors are rounded to bfloat16 first.", "", head]
    lines += tensors.report_rows(s, line)
    return "\n".join(lines) + "\n"


#: ``trainfab tensor-stats`` options of the analysis
OPTIONS = ((("--bdc-group",), {"dest": "group", "type": bounded(int, *GROUP_RANGE),
                               "default": 32,
                               "help": "BDC values per group, 2 to 64 (default 32)"}),)

__all__ = ["CHUNK_VALUES", "GROUP_RANGE", "OPTIONS", "bdc_stats", "bdc_markdown"]
