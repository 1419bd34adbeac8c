"""Workload studies: training runs in every number format, the FPRaker speedup model, the
model and tensor readers, and the dispatcher study.  They import golden/ models and never hdl/."""
