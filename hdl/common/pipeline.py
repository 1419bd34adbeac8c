"""Pipeline stages: the registers every pipelined unit places the same way.

Three pieces, so that a unit states *where* its stages go and never re-derives *how*:

* :func:`delay` / :class:`DelayLine` — a value through ``depth`` registers (optionally advancing
  only while an enable is high): side-band fields (a valid bit, a clear flag, a special-case
  result) that travel beside a pipelined datapath, or a fixed-latency datapath of its own.
  ``depth = 0`` returns the value itself and adds nothing to the design.
* :func:`stage` — one register stage cut through a combinational datapath at a named point:
  every value of a list or dict comes back as its registered copy, or unchanged when the cut is
  not taken, so a unit writes its datapath once and turns each cut on or off.
* :class:`StreamSlice` — a register slice for a ``lib.stream`` valid/ready stream (a skid
  buffer): ``o.valid``/``o.payload`` and ``i.ready`` all come from registers, so the slice cuts
  every combinational path through the stream in both directions, and it still moves one
  transfer per cycle while the consumer is ready.  Nothing is lost, duplicated or reordered
  whatever the producer's idle cycles and the consumer's back-pressure.
* :func:`ring`, :func:`state_rings`, :func:`slot_ports` and :func:`slots` — C-slow retiming: a state register held
  once per interleaved context, in a ring whose head is the context served in the cycle, and
  the ports and counters that name the contexts (the served one, and the one a loop
  ``pipeline`` stages behind shows).

Registers live in the ``sync`` domain (clock ``clk``, synchronous reset ``rst``) and reset to 0.
"""

from amaranth.hdl import Module, Mux, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out


def _shape(value):
    """The shape of a value, an Amaranth ``data`` view (its layout) or a value-castable."""
    if hasattr(value, "shape"):
        return value.shape()
    return Value.cast(value).shape()


def delay(m, value, depth: int, *, en=None, name: str | None = None):
    """``value`` delayed by ``depth`` clock cycles: a chain of ``depth`` registers in ``m``'s
    ``sync`` domain (reset value 0), of ``value``'s shape (a data view stays a view).

    With ``en``, every register of the chain loads only while ``en`` is high (the whole line
    advances together: a stalled pipeline holds its contents).  ``depth = 0`` returns
    ``value`` itself (no register, no signal).  ``name`` names the registers
    ``<name>_d1`` … ``<name>_d<depth>`` in the generated Verilog."""
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 0:
        raise ValueError(f"delay depth must be an integer >= 0, not {depth!r}")
    shape = _shape(value)
    for k in range(1, depth + 1):
        reg = Signal(shape, name=f"{name}_d{k}" if name else None)
        if en is None:
            m.d.sync += reg.eq(value)
        else:
            with m.If(en):
                m.d.sync += reg.eq(value)
        value = reg
    return value


def stage(m, values, enable: bool = True, *, en=None, name: str = "stage"):
    """A register stage at a named cut point of a combinational datapath.

    ``values`` is a dict (name → value) or a list/tuple of values; the result has the same
    form, each value replaced by its registered copy (one cycle later, named
    ``<name>_<key>`` in the generated Verilog) when ``enable`` is true, or returned unchanged
    (no register) when the cut is not taken.  ``en`` (a signal) makes the registers load only
    while it is high, as in :func:`delay`."""
    if isinstance(values, dict):
        return {k: delay(m, v, 1 if enable else 0, en=en, name=f"{name}_{k}")
                for k, v in values.items()}
    out = [delay(m, v, 1 if enable else 0, en=en, name=f"{name}_{k}")
           for k, v in enumerate(values)]
    return type(values)(out) if isinstance(values, tuple) else out


def ring(m, cur, nxt, contexts: int, *, name: str) -> None:
    """A state register ``cur`` (a signal: the head, the state of the context served in this
    cycle) held for ``contexts`` interleaved contexts (C-slow).  ``nxt`` is the head's next
    state, computed from ``cur`` by the unit's logic; it enters the ring's tail and returns to
    the head ``contexts`` edges later, so every context advances once every ``contexts``
    cycles.  ``contexts = 1`` is the plain register ``cur <= nxt``.  The other registers are
    named ``<name>_ctx1`` … and reset to ``cur``'s reset value, so every context starts from
    the same state."""
    base = Value.cast(cur)
    regs = [cur] + [Signal(len(base), name=f"{name}_ctx{k}", init=base.init)
                    for k in range(1, contexts)]
    m.d.sync += regs[-1].eq(nxt)
    for k in range(contexts - 1):
        m.d.sync += regs[k].eq(regs[k + 1])


def state_rings(m, state: dict, contexts: int):
    """A unit's state registers (``state``: name → signal) held once per interleaved context:
    the signals its logic assigns the next state to, and the domain to assign them in.  With
    one context these are the registers themselves, in ``sync``.  With more, they are ``comb``
    signals ``<name>_next`` that default to the head (an unassigned register holds the served
    context's state) and enter each register's :func:`ring`."""
    if contexts == 1:
        return state, "sync"
    nxt = {k: Signal(v.shape(), name=f"{k}_next") for k, v in state.items()}
    for k, v in state.items():
        m.d.comb += nxt[k].eq(v)
        ring(m, v, nxt[k], contexts, name=k)
    return nxt, "comb"


def slot_ports(contexts: int) -> dict:
    """The ports of a unit with ``contexts`` interleaved sums (none for one): ``slot``, the
    context served in the cycle, and ``acc_slot``, the one its accumulators show (driven by
    :func:`slots`)."""
    if contexts == 1:
        return {}
    return {"slot": Out(range(contexts)), "acc_slot": Out(range(contexts))}


def slots(m, slot, shown, contexts: int, lag: int) -> None:
    """Drive ``slot``, a free-running counter ``0 .. contexts - 1`` (0 after reset: the context
    served in the cycle), and ``shown = (slot - lag) mod contexts`` (the context that a loop
    ``lag`` cycles behind the served one shows)."""
    with m.If(slot == contexts - 1):
        m.d.sync += slot.eq(0)
    with m.Else():
        m.d.sync += slot.eq(slot + 1)
    shift = (contexts - lag % contexts) % contexts
    m.d.comb += shown.eq(Mux(slot + shift >= contexts, slot + shift - contexts, slot + shift))


class DelayLine(wiring.Component):
    """A value through ``depth`` registers: ``o`` is ``i`` from ``depth`` cycles earlier
    (counting only the cycles with ``en`` high when ``enable`` is set).

    Latency: ``depth`` cycles (``depth = 0``: a wire).  Throughput: one value per cycle.

    Parameters
    ----------
    shape : Shape, layout or int
        Shape of the value.
    depth : int
        Registers in the line, >= 0.
    enable : bool
        Add the ``en`` input: the line advances only while it is high.

    Ports
    -----
    i : In(shape); o : Out(shape); en : In(1) (with ``enable``)
    """

    def __init__(self, shape, depth: int, enable: bool = False):
        if not isinstance(depth, int) or isinstance(depth, bool) or depth < 0:
            raise ValueError(f"DelayLine depth must be an integer >= 0, not {depth!r}")
        self.depth = depth
        self.enable = enable
        members = {"i": In(shape), "o": Out(shape)}
        if enable:
            members["en"] = In(1)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        out = delay(m, self.i, self.depth, en=self.en if self.enable else None, name="line")
        m.d.comb += self.o.eq(out)
        return m


class StreamSlice(wiring.Component):
    """A register slice for a valid/ready stream (a skid buffer).

    ``o.valid``, ``o.payload`` and ``i.ready`` are registers: no combinational path crosses the
    slice in either direction.  ``i.ready`` is high while the skid register is empty.  When the
    consumer stalls (``o.valid & ~o.ready``) while a transfer comes in, that payload goes into
    the skid register and ``i.ready`` drops on the next cycle; when the output frees up, the
    skid register's payload moves to the output before any newer one.

    Latency: one cycle (a payload accepted at an edge is on ``o`` from the next cycle).
    Throughput: one transfer per cycle while ``o.ready`` stays high; after back-pressure the
    stream resumes at full rate.  Transfers leave in the order they came, each exactly once.

    Parameters
    ----------
    shape : Shape, layout or int
        The payload's shape.

    Ports
    -----
    i : In(stream.Signature(shape))
        The producer's side.
    o : Out(stream.Signature(shape))
        The consumer's side.
    """

    def __init__(self, shape):
        self.payload_shape = shape
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))})

    def elaborate(self, platform):
        m = Module()
        i, o = self.i, self.o
        skid_valid = Signal(name="skid_valid")
        skid = Signal(self.payload_shape, name="skid")
        out_valid = Signal(name="out_valid")
        out_payload = Signal(self.payload_shape, name="out_payload")
        m.d.comb += [i.ready.eq(~skid_valid), o.valid.eq(out_valid), o.payload.eq(out_payload)]
        with m.If(~out_valid | o.ready):
            # the output register is free (or being emptied at this edge)
            with m.If(skid_valid):
                m.d.sync += [out_payload.eq(skid), out_valid.eq(1), skid_valid.eq(0)]
            with m.Else():
                m.d.sync += [out_payload.eq(i.payload), out_valid.eq(i.valid)]
        with m.Elif(i.valid & ~skid_valid):
            # the consumer stalls: park the incoming payload
            m.d.sync += [skid.eq(i.payload), skid_valid.eq(1)]
        return m


__all__ = ["delay", "stage", "ring", "state_rings", "slot_ports", "slots", "DelayLine",
           "StreamSlice"]
