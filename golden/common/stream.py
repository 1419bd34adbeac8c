"""Cycle models of pipelined units: a stream unit whose pipeline stalls as a whole (FAST's
converter, Equinox's quantizer: :class:`hdl.common.bfp.BFPPipeline`), and an accumulator fed
through fixed register stages (the MAC baselines), with one state or several interleaved ones
(C-slow: the MACs' ``contexts``)."""

from dataclasses import dataclass


@dataclass(frozen=True)
class StreamCycle:
    """A stream unit's outputs in one cycle (:meth:`StallingPipeline.step`)."""

    #: ``i.ready``: an item offered in this cycle is taken at its clock edge
    ready: bool
    #: the item taken at this cycle's edge (its index in acceptance order), or ``None``
    taken: int | None
    #: ``o.valid`` with the item it shows (index in acceptance order), or ``None``
    out: int | None
    #: the sticky ``error``
    error: bool


class StallingPipeline:
    """``latency`` registers, the last one the output register, that advance together: in a
    cycle in which the output register is empty or read (``o.ready``), ``i.ready`` is high,
    every item moves one register on and an item offered with ``valid`` is taken into the
    first; otherwise everything holds (back-pressure).  So an item taken at edge ``t`` shows on
    ``o`` from the cycle after edge ``t + latency - 1`` when nothing stalls, one item per cycle
    while ``o`` is ready, each exactly once and in order.  An item for which ``bad(item)`` is
    true sets ``error`` at the edge it enters register ``flag_at + 1`` (0-based ``flag_at``),
    and ``error`` stays set.

    ``error``: the flag before the first cycle, with no item in flight (default: after reset).
    """

    def __init__(self, latency: int, flag_at: int, bad, error: bool = False):
        if not 0 <= flag_at < latency:
            raise ValueError(f"flag_at must be in 0..{latency - 1}, not {flag_at}")
        self.flag_at = flag_at
        self.bad = bad
        #: per register: ``(index, bad)`` of the item it holds, or ``None``
        self.line = [None] * latency
        self.error = bool(error)
        self.taken = 0

    @property
    def idle(self) -> bool:
        """No item in flight."""
        return all(r is None for r in self.line)

    def step(self, item=None, ready: bool = True) -> StreamCycle:
        """One cycle with ``item`` offered (``None``: ``valid`` low) and the consumer's
        ``ready``: the unit's outputs in this cycle, then its clock edge."""
        shown = self.line[-1]
        advance = shown is None or bool(ready)
        taken = self.taken if advance and item is not None else None
        now = StreamCycle(advance, taken, None if shown is None else shown[0], self.error)
        if advance:
            entering = None if taken is None else (taken, bool(self.bad(item)))
            self.line = [entering] + self.line[:-1]
            flag = self.line[self.flag_at]
            self.error = self.error or (flag is not None and flag[1])
            self.taken += taken is not None
        return now

    def run(self, cycles) -> list:
        """:meth:`step` over ``cycles`` (per cycle ``(item, ready)``): the outputs of every
        cycle."""
        return [self.step(item, ready) for item, ready in cycles]


def delayed_steps(cycles, depth: int, state, step, snapshot=lambda s: s) -> list:
    """An always-ready unit whose input reaches its state ``depth`` register stages late:
    ``cycles`` holds, per clock cycle, ``None`` (nothing offered) or an item; the item offered
    in cycle ``t`` is applied (``state = step(state, item)``) at edge ``t + depth``, each one
    exactly once and in order, and idle cycles leave the state as it is.  Returns
    ``snapshot(state)`` as seen in the cycle after each edge."""
    line = [None] * depth
    out = []
    for item in cycles:
        line.append(item)
        entering = line.pop(0)
        if entering is not None:
            state = step(state, entering)
        out.append(snapshot(state))
    return out


def interleaved_steps(cycles, depth: int, contexts: int, states, step, slot: int = 0,
                      snapshot=lambda s: s) -> list:
    """An always-ready unit with ``contexts`` interleaved states (C-slow): the item offered in
    cycle ``t`` belongs to state ``(slot + t) mod contexts`` and is applied to it
    (``states[c] = step(states[c], item)``) ``depth`` stages later, in a loop whose
    ``contexts`` registers pass each state once every ``contexts`` cycles.  In cycle ``t`` the
    unit shows state ``(slot + t - depth) mod contexts``
    (:func:`interleaved_shown`) with its items up to cycle ``t - contexts - depth``.  Returns
    ``snapshot(state shown)`` in the cycle after each edge (entry ``t``: cycle ``t + 1``), as
    :func:`delayed_steps` does; ``states``: the ``contexts`` states before the first cycle,
    with nothing in flight."""
    states = list(states)
    if len(states) != contexts:
        raise ValueError(f"interleaved_steps: {len(states)} states for {contexts} contexts")
    if isinstance(slot, bool) or not isinstance(slot, int) or not 0 <= slot < contexts:
        raise ValueError(f"slot {slot!r}; {contexts} contexts have slots 0..{contexts - 1}")
    lag = contexts + depth
    out = []
    for t in range(len(cycles)):
        # the cycle after edge t shows the states with every item up to cycle t + 1 - lag
        u = t + 1 - lag
        if u >= 0 and cycles[u] is not None:
            c = (slot + u) % contexts
            states[c] = step(states[c], cycles[u])
        out.append(snapshot(states[interleaved_shown(t + 1, depth, contexts, slot)]))
    return out


def interleaved_shown(t: int, depth: int, contexts: int, slot: int = 0) -> int:
    """The state an :func:`interleaved_steps` unit shows in cycle ``t`` of a run whose first
    cycle serves ``slot``: ``(slot + t - depth) mod contexts``."""
    return (slot + t - depth) % contexts


__all__ = ["StreamCycle", "StallingPipeline", "delayed_steps", "interleaved_steps",
           "interleaved_shown"]
