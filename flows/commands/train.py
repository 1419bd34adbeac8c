"""``trainfab train``: one training run per number format, in parallel processes, and its
report (:mod:`flows.studies.train.run`)."""

import sys

from ..options import SEED_HELP, bounded
from .common import span


def add_arguments(p) -> None:
    from ..studies.train import run as train_run
    from ..studies.train.formats import ABLATIONS, FORMATS

    p.add_argument("--model", default="cnn",
                   help="mlp, cnn, cnn-q4, lenet or resnet (default %(default)s)")
    p.add_argument("--formats", default="all", metavar="LIST",
                   help="comma-separated formats, or all (default): " + ", ".join(FORMATS)
                        + "; the ablations " + ", ".join(ABLATIONS) + " only when named")
    p.add_argument("--epochs", type=bounded(int, *train_run.EPOCHS_RANGE), default=None,
                   help=f"training epochs, {span(train_run.EPOCHS_RANGE)}: the length of the "
                   "learning-rate schedule (default 10)")
    p.add_argument("--stop-after", metavar="FORMAT=EPOCH[,...]", default=None,
                   help="end these formats' runs after that epoch of the common schedule "
                        "(a slow format, compared with the others at the same epoch)")
    p.add_argument("--batch-size", type=bounded(int, *train_run.BATCH_RANGE), default=None,
                   help=f"mini-batch size, {span(train_run.BATCH_RANGE)} (default 32)")
    p.add_argument("--seed", type=bounded(int, *train_run.SEED_RANGE), default=0,
                   help="seed of the split, initialization, data order and rounding, "
                        f"{SEED_HELP} (default 0)")
    p.add_argument("-j", "--jobs", type=bounded(int, *train_run.JOBS_RANGE), default=2,
                   help=f"formats trained at once, one process each, "
                        f"{span(train_run.JOBS_RANGE)} (default 2)")
    p.add_argument("--dataset", metavar="SET",
                   help="digits (default: scikit-learn's 8x8 digits, split 80/20 by the seed), "
                        "fashion-mnist (Debian's dataset-fashion-mnist, the official split), "
                        "a folder of the four IDX files, or FILE.npz: x (N,C,H,W) or (N,F) "
                        "floats, y integer labels")
    p.add_argument("--limit", type=bounded(int, *train_run.LIMIT_RANGE), default=None,
                   metavar="N", help="keep N samples of the shuffled dataset (quick runs), "
                                     f"{span(train_run.LIMIT_RANGE)}")
    p.add_argument("--capture", metavar="DIR",
                   help="record both operands of every GEMM of one mini-batch per epoch, "
                        "as bf16, in DIR/<format>/")
    p.add_argument("--output", "-o", metavar="DIR",
                   help="output folder (default build/train/<model>)")


def run(args) -> int:
    from ..studies.train.run import (TrainOptions, output_folder, parse_formats,
                                     parse_stop_after, train)

    opts = TrainOptions(model=args.model, formats=parse_formats(args.formats),
                        epochs=args.epochs, seed=args.seed, jobs=args.jobs,
                        dataset=args.dataset, capture=args.capture, output=args.output,
                        batch_size=args.batch_size, limit=args.limit,
                        stop_after=(parse_stop_after(args.stop_after)
                                    if args.stop_after is not None else ()))
    run = train(opts)
    out = output_folder(opts)
    print((out / "train.md").read_text())
    print(f"written: {out / 'train.md'}, {out / 'train.json'}, {out / 'train.csv'}, "
          f"{out / 'accuracy.png'}, {out / 'loss.png'}")
    if opts.capture:
        print(f"captured operands: {opts.capture}/<format> (trainfab speedup, tensor-stats)")
    if run.interrupted:
        raise KeyboardInterrupt
    if run.errors:
        for name, (msg, _) in run.errors.items():
            print(f"trainfab: format {name} failed: {msg}", file=sys.stderr)
        return 1
    return 0
