"""Summary runs: ``trainfab report`` (area/timing at every paper preset, with ratios beside the
papers' numbers, :mod:`.tables`), ``trainfab demo`` (``make demo``, :mod:`.demo`) and ``make
paper`` (:mod:`.paper_run`).

Units, the parts the papers report separately, the papers' own figures and the ratios they
state are declared by the family modules (:mod:`flows.families`).
"""

from .demo_run import demo, demo_ratios, demo_units
from .paper_run import named_config, paper, paper_estimate, paper_steps, paper_workers
from .tables import (check_markdown_path, energy_at, own_clock_rows, own_clock_section,
                     paper_figures, report, results_page)

__all__ = ["own_clock_rows", "own_clock_section", "energy_at", "paper_figures", "report",
           "results_page", "check_markdown_path", "demo", "demo_units", "demo_ratios", "paper",
           "paper_steps", "paper_estimate", "paper_workers", "named_config"]
