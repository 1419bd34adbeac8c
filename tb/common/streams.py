"""Valid/ready stream drivers (:mod:`amaranth.lib.stream` ports) and the cycle loop.

All streams are driven and sampled by one cycle loop, :func:`run`: on the falling edge every
source drives its ``valid``/``payload`` (and any per-item extra ports) and every sink its
``ready``; then, in ``ReadOnly`` of the same time step (nothing changes until the next rising
edge), each stream's handshake is read and recorded.  A source holds an item until it is
accepted (``valid`` never drops before ``ready``), idles at random with probability ``gap``; a
sink is ready with probability ``p_ready`` (back-pressure).  Payloads are integers, or dicts
packed through the port's layout when one is given (:mod:`.layouts`).

Random stream tests run their items under every combination of an idle-gap pattern and a
back-pressure pattern, split by :func:`cross`.
"""

from cocotb.triggers import FallingEdge, ReadOnly

from . import uint
from .layouts import pack


#: idle-gap probabilities a stream test crosses by default: back to back, and frequent bubbles
GAPS = (0.0, 0.3)
#: sink-ready probabilities a stream test crosses by default: always ready, and back-pressure
BACK_PRESSURE = (1.0, 0.6)


def cross(items, gaps=GAPS, back_pressure=BACK_PRESSURE):
    """Every combination of an idle-gap pattern and a back-pressure pattern, each with its share
    of ``items``.

    Yields ``(part, gap, ready)`` for every ``gap`` of ``gaps`` and ``ready`` of
    ``back_pressure`` (gaps-major, so lists ordered from light to heavy start back to back and
    end under both stalls); ``part`` is the next consecutive slice of ``items``, the slices
    differing in length by at most one.  A combination left without items is skipped.  A
    pattern is whatever the test's stream function takes for it: a probability, or a tuple of
    them for several sinks.
    """
    items = list(items)
    combos = [(g, p) for g in gaps for p in back_pressure]
    n = len(combos)
    for k, (gap, ready) in enumerate(combos):
        part = items[k * len(items) // n:(k + 1) * len(items) // n]
        if part:
            yield part, gap, ready


class _Stream:
    """The three ports of a stream member ``name`` of the unit."""

    def __init__(self, dut, name: str):
        self.name = name
        self.valid = getattr(dut, f"{name}__valid")
        self.payload = getattr(dut, f"{name}__payload")
        self.ready = getattr(dut, f"{name}__ready")


class Source(_Stream):
    """Drives ``<name>__valid``/``<name>__payload`` from a list of items.

    Each item is ``(payload, extra)`` where ``extra`` maps further port names to values driven
    with the item (the Gecko compressor samples its side-band inputs with each row); with a
    ``layout`` the payload is a dict packed through it.  ``gap`` is the probability of idling
    instead of offering the next item.  ``accepted_cycles`` records when each item was taken.
    """

    def __init__(self, dut, name: str, items, rnd, gap: float = 0.0, layout=None):
        super().__init__(dut, name)
        self.dut = dut
        self.layout = layout
        self.items = list(items)
        self.rnd = rnd
        self.gap = gap
        self.offering = False
        self.accepted_cycles = []
        self.valid.value = 0

    def drive(self) -> None:
        if not self.offering and self.items and self.rnd.random() >= self.gap:
            payload, extra = self.items[0]
            self.payload.value = payload if self.layout is None else pack(self.layout, payload)
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


class Sink(_Stream):
    """Drives ``<name>__ready`` (high with probability ``p_ready``) and collects payloads."""

    def __init__(self, dut, name: str, rnd, p_ready: float = 1.0):
        super().__init__(dut, name)
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

    def expect(self, want, where: str = "") -> None:
        """Assert that exactly the payloads ``want`` arrived, in order."""
        name = self.name
        for q, (got, exp) in enumerate(zip(self.got, want)):
            assert got == exp, f"{where}{name} item {q}: got {got:#x}, expected {exp:#x}"
        assert len(self.got) == len(want), \
            f"{where}{name}: {len(self.got)} items, expected {len(want)}"


async def quiet(dut, sinks, cycles: int = 3) -> None:
    """Hold every sink ready for ``cycles`` cycles and assert that nothing more arrives."""
    for k in sinks:
        k.ready.value = 1
    for _ in range(cycles):
        await FallingEdge(dut.clk)
        for k in sinks:
            assert not uint(k.valid), f"unexpected extra item on {k.name}"


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
            left = ", ".join(f"{len(x.items)} items left on {x.name}" for x in sources)
            got = ", ".join(f"{len(k.got)} items from {k.name}" for k in sinks)
            raise AssertionError(f"timed out after {max_cycles} cycles: {left}; {got}")
