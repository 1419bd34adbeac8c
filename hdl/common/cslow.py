"""C-slow: a whole design holding ``contexts`` independent computations in rotation.

:func:`c_slow` turns an elaborated design into its C-slow version (Leiserson and Saxe's
transformation): every register of the ``sync`` domain becomes a chain of ``contexts``
registers.  The logic is unchanged: it reads the chain's last register (the state of the
context served in this cycle), and what it assigns enters the chain's first one, so a context's
state comes back to the logic ``contexts`` edges later.  An unassigned register holds the
served context's state, as the one-context design's register holds its own.  Only the chain's
first register has the register's reset; the others take the reset value from it, so a reset
held for ``contexts`` cycles resets every context (a shorter one, only some).  With no reset
between them, a retiming synthesis can move the chain's registers into the logic.

Contract: cycle ``t`` after reset serves context ``t mod contexts``, which sees exactly the
one-context design's cycle ``t // contexts``: its inputs are that context's inputs, its outputs
(combinational from the state and the inputs, as in the one-context design) are that context's
outputs, in the same cycle.  Every context starts from the reset state (at power-up every
register holds its reset value; after a reset of at least ``contexts`` cycles, cycle ``t``
counts from the reset's release).  The design does ``contexts`` independent jobs in the
cycles one job took, on the same logic; what it gains is registers that a retiming synthesis
moves into the logic (``trainfab area`` retimes a unit's C-slow configurations,
:attr:`flows.registry.Unit.cslow_field`), so that every loop of the design holds ``contexts``
registers instead of one and the clock can be up to ``contexts`` times faster.

This is the generic form of what units such as ``fast.fmac`` and ``fpraker.pe`` do by hand
(:func:`hdl.common.pipeline.ring` places their extra registers inside their loops); the
transformation places nothing, which is why it needs retiming, and needs no change to the
design it transforms.

Limits: one clock domain, ``sync``; no memories (a design with a ``Memory`` is refused).
"""

from amaranth.hdl import Fragment, Signal
from amaranth.hdl._ast import Assign, Switch, _StatementList
from amaranth.hdl._mem import MemoryInstance
from amaranth.hdl._xfrm import LHSMaskCollector, ValueTransformer

#: the most contexts :func:`c_slow` accepts (a sanity bound: registers grow linearly)
MAX_CONTEXTS = 16


class _Rename(ValueTransformer):
    def __init__(self, mapping):
        self.mapping = mapping

    def on_Signal(self, value):
        return self.mapping.get(id(value), value)


def _rename_lhs(stmt, rename):
    """``stmt`` with every assignment's target signals renamed (its right-hand sides kept)."""
    if type(stmt) is Assign:
        new = Assign(rename(stmt.lhs), stmt.rhs)
        new.src_loc = stmt.src_loc
        return new
    if type(stmt) is Switch:
        return Switch(stmt.test, [(patterns, _rename_lhs(s, rename), loc)
                                  for patterns, s, loc in stmt.cases], src_loc=stmt.src_loc)
    if isinstance(stmt, (list, tuple, _StatementList)):
        return _StatementList(_rename_lhs(s, rename) for s in stmt)
    return stmt


def _transform(fragment, contexts: int):
    if isinstance(fragment, MemoryInstance):
        raise ValueError("c_slow: the design has a memory; only registers can be C-slowed")
    for i, (sub, name, loc) in enumerate(fragment.subfragments):
        fragment.subfragments[i] = (_transform(sub, contexts), name, loc)
    domains = set(fragment.statements) - {"comb"}
    if domains - {"sync"}:
        raise ValueError(f"c_slow: the design uses the clock domains {sorted(domains)}; only "
                         "'sync' can be C-slowed")
    stmts = fragment.statements.pop("sync", None)
    if stmts is None:
        return fragment
    lhs = LHSMaskCollector()
    lhs.visit_stmt(stmts)
    nexts, chain = {}, []
    for sig, _mask in lhs.masks():
        nxt = Signal(sig.shape(), name=f"{sig.name}_next")
        nexts[id(sig)] = nxt
        # the chain: the first register resets as the design's register does, the others
        # take the reset value from it (a reset held for `contexts` cycles reaches them all);
        # with no reset between them, retiming may move them into the logic freely
        regs = [Signal(sig.shape(), name=f"{sig.name}_ctx{k}", init=sig.init,
                       reset_less=sig.reset_less or k > 1) for k in range(1, contexts + 1)]
        stage = [nxt] + regs
        chain += [stage[k + 1].eq(stage[k]) for k in range(contexts)]
        # the served context's state leaves the chain
        fragment.add_statements("comb", sig.eq(regs[-1]))
        # an unassigned register holds the served context's state
        fragment.add_statements("comb", nxt.eq(sig))
    rename = _Rename(nexts)
    fragment.add_statements("comb", _rename_lhs(stmts, rename))
    fragment.add_statements("sync", chain)
    return fragment


def c_slow(design, contexts: int, platform=None) -> Fragment:
    """The C-slow version of ``design`` (an elaboratable) with ``contexts`` contexts (see the
    module docstring); ``contexts = 1`` returns the design's own fragment unchanged."""
    if type(contexts) is not int or not 1 <= contexts <= MAX_CONTEXTS:
        raise ValueError(f"c_slow: contexts must be an integer in 1..{MAX_CONTEXTS}, "
                         f"not {contexts!r}")
    fragment = Fragment.get(design, platform)
    if contexts == 1:
        return fragment
    return _transform(fragment, contexts)


__all__ = ["MAX_CONTEXTS", "c_slow"]
