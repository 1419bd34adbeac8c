"""Checkers that compare DUT ports with golden-model records.

* :func:`expect_acc` — an :class:`~hdl.common.signatures.AccumulatorSignature` interface
  (``<prefix>__zero/sign/exp/sig/out``) against a golden accumulator and its read-out;
* :class:`TraceChecker` — trace ports ``<prefix>__<field>`` against the same-named fields of a
  golden per-cycle record (e.g. :class:`golden.fpraker.CycleTrace`), field by field.
"""

from golden.common.accumulator import Acc, read_out

from . import sint, uint


def expect_acc(dut, acc: Acc, cfg, where: str, prefix: str = "acc") -> None:
    """Assert that the accumulator ports equal ``acc`` and the read-out equals
    ``golden.common.accumulator.read_out(acc, cfg)``."""
    got = tuple(f(getattr(dut, f"{prefix}__{name}"))
                for f, name in ((uint, "zero"), (uint, "sign"), (sint, "exp"), (uint, "sig")))
    want = (int(acc.zero), acc.sign, acc.exp, acc.sig)
    assert got == want, f"{where}: acc (zero, sign, exp, sig) = {got}, golden {want}"
    out, ref = uint(getattr(dut, f"{prefix}__out")), read_out(acc, cfg)
    assert out == ref, f"{where}: read-out 0x{out:04X}, golden 0x{ref:04X} for {tuple(acc)}"


class TraceChecker:
    """Compares trace ports with a golden per-cycle record, keyed by field name.

    Parameters
    ----------
    dut
        The cocotb handle of the unit.
    fields : dict
        Field name → converter from the golden record's value to the port's integer (return
        ``None`` to skip the field in a cycle).  The port read is ``<prefix>__<field>``.
    signed : iterable of str
        Fields whose ports are read as two's complement.
    prefix : str
        The trace interface's member name (``trace``).
    """

    def __init__(self, dut, fields: dict, signed=(), prefix: str = "trace"):
        self.fields = {name: (getattr(dut, f"{prefix}__{name}"), conv,
                              sint if name in signed else uint)
                       for name, conv in fields.items()}
        #: fields compared so far
        self.compared = 0

    def check(self, record, where: str) -> None:
        """Assert every field of ``record`` (whose converter does not return None)."""
        for name, (handle, conv, read) in self.fields.items():
            want = conv(getattr(record, name))
            if want is None:
                continue
            got = read(handle)
            assert got == want, f"{where}: {name} = {got}, golden {want} ({record})"
            self.compared += 1
