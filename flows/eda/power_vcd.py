"""Toggle counts and duty cycles of the signals of a VCD file over a time window.

:func:`activity` reads a value-change dump (Icarus' ``$dumpfile`` VCD or Verilator's
``--trace`` VCD) and returns, for every one-bit signal of the scopes asked for, the number of
0↔1 transitions inside the window and the fraction of the window it spent at 1.  A transition
is counted at the end of a time step, from the value before the step to the value after it, so
zero-delay evaluation order (a signal written twice in one step) never counts.  Changes to or
from ``x``/``z`` are not transitions; a signal that is ``x`` or ``z`` for the whole window is
reported as unknown.
"""

from pathlib import Path

from .. import FlowError


def _scopes(path: Path, f):
    """Parse the header: id code → list of (scope path, name); returns at ``$enddefinitions``."""
    ids: dict[str, list[tuple[tuple[str, ...], str]]] = {}
    widths: dict[str, int] = {}
    scope: list[str] = []
    for line in f:
        words = line.split()
        if not words:
            continue
        if words[0] == "$scope":
            scope.append(words[2])
        elif words[0] == "$upscope":
            scope.pop()
        elif words[0] == "$var":
            # $var kind width id name [range] $end
            code, name = words[3], words[4]
            ids.setdefault(code, []).append((tuple(scope), name))
            widths[code] = int(words[2])
        elif words[0] == "$enddefinitions":
            return ids, widths
    raise FlowError(f"{path}: not a VCD file (no $enddefinitions)")


def activity(path: Path, start: int, end: int, wanted) -> dict[tuple[tuple[str, ...], str], tuple]:
    """``(scope path, name) → (transitions, time at 1, time known)`` for the one-bit signals for
    which ``wanted(scope path, name)`` is true, between times ``start`` and ``end`` (in the
    file's time unit; a transition exactly at ``start`` is outside, one at ``end`` inside)."""
    path = Path(path)
    if end <= start:
        raise FlowError(f"power window is empty ({start}..{end})")
    with open(path, errors="replace") as f:
        ids, widths = _scopes(path, f)
        keep = {code: [k for k in names if wanted(*k)] for code, names in ids.items()
                if widths[code] == 1}
        keep = {code: names for code, names in keep.items() if names}
        value = {code: "x" for code in keep}         # value at the current time
        toggles = dict.fromkeys(keep, 0)
        high = dict.fromkeys(keep, 0)
        known = dict.fromkeys(keep, 0)
        since = dict.fromkeys(keep, start)           # when the current value started (clipped)
        before: dict[str, str] = {}                  # value at the start of the current step
        now = 0

        def close_step(t_next):
            # account the step that ended: transitions at `now`, levels until t_next
            for code, old in before.items():
                new = value[code]
                if start < now <= end and old != new and old in "01" and new in "01":
                    toggles[code] += 1
            before.clear()

        def settle(code, t):
            # time from since[code] to t at the signal's current value, within the window
            lo, hi = max(since[code], start), min(t, end)
            if hi > lo:
                v = value[code]
                if v in "01":
                    known[code] += hi - lo
                    if v == "1":
                        high[code] += hi - lo
            since[code] = t

        for line in f:
            if not line or line[0] in "$ \n":
                continue
            c = line[0]
            if c == "#":
                t = int(line[1:])
                if t != now:
                    close_step(t)
                    now = t
                if now > end:
                    break
                continue
            if c in "01xzXZ":
                code, v = line[1:].strip(), c.lower()
            elif c in "bB":
                bits, _, code = line[1:].partition(" ")
                code, v = code.strip(), bits.strip()[-1:].lower()
            else:
                continue
            if code in keep and value[code] != v:
                if code not in before:
                    before[code] = value[code]
                settle(code, now)
                value[code] = v
        close_step(None)
        for code in keep:
            settle(code, end)
    out = {}
    for code, names in keep.items():
        for k in names:
            out[k] = (toggles[code], high[code], known[code])
    return out


__all__ = ["activity"]
