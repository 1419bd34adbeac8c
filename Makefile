# trainfab: the two commands are `make demo` and `make test`; both set up what they need.
#
#   make demo       one small unit of each family: Verilog, a quick regression, area/timing, a
#                   comparison table and a plot (a few minutes)
#   make paper      every unit at its paper configuration, the papers' tables, tile power and
#                   speedup on MiniLM, the term-encoder sweep and the 8 x 8 tiles; writes
#                   docs/results.md (about 1 h 20 min on 2 cores)
#   make timing     every pipelined unit at its paper configuration with the stages (and
#                   contexts) that close its timing, 200 MHz (150 MHz for the 8 x 8 tiles);
#                   writes docs/timing.md (about 30 minutes on 2 cores)
#   make test       the whole test suite at standard effort: golden tests, every cocotb testbench
#                   at its paper and test configurations, synthesis of every unit at a small
#                   configuration, flow and CLI tests (under 10 minutes on 2 cores)
#   make test-full  the same suite at full effort: long random testbench runs and synthesis of
#                   every unit at its paper configuration
#   make bench      golden-model speed, cycle statistics, tensor-stats throughput
#   make docs       the documentation's tables regenerated from the declarations (units,
#                   fields, test configurations, ports); make test checks they are current
#   make training   Fashion-MNIST: the designs' formats, fp32 and bf16 train lenet on the
#                   60,000 images, fp32 and bf16 train resnet on 20,000; FPRaker's speedup and
#                   FAST's time on the captured GEMMs, the HBFP error study; writes
#                   docs/training.md (about 70 minutes on 2 cores, under 2 GB of memory and
#                   200 MB of captures)
#   make training-baselines  after make training: FAST Table II's other formats (int8, int12,
#                   hfp8, fp16, mid-bfp, msfp12) train lenet the same way, trainfab's Table IV
#                   areas size the iso-area arrays, FAST's time to accuracy against every
#                   array's own run; the Table II part of docs/training.md (about 35 minutes)
#   make training-sweeps  HBFP's mantissa x block size x weight storage, FAST's alpha x beta
#                   and its width x group size, lenet on 12,000 Fashion-MNIST images; the
#                   sweeps part of docs/training.md (about 40 minutes)
#   make training-digits  the same on scikit-learn's digits (mlp, cnn, cnn-q4): the digits
#                   part of docs/training.md
#   make studies    FPRaker rows, independent PEs, interleaved tile, Equinox dispatch: the studies
#                   no other target runs, into build/studies/ (about 45 minutes on 2 cores)
#   JOBS=N          pytest-xdist workers (default 2)
#
# Set-up: Debian packages (iverilog, yosys, opensta, the OSU 0.18 µm liberty) are installed
# with apt-get when running as root, otherwise the missing ones are named and make stops.
# Python packages go into a project virtual environment (.venv), refreshed when
# pyproject.toml changes.  A second run installs nothing.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEBIAN_PACKAGES := iverilog yosys opensta qflow-tech-osu018 dataset-fashion-mnist
JOBS ?= 2

.PHONY: all setup debian demo paper timing test test-full bench training training-baselines training-sweeps training-digits studies docs clean

all: demo

setup: debian $(STAMP)

debian:
	@missing=""; \
	for p in $(DEBIAN_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || missing="$$missing python3-venv"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; \
	  else \
	    echo "trainfab needs Debian packages:$$missing; install them with: sudo apt-get install$$missing"; \
	    exit 1; \
	  fi; \
	fi

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "trainfab needs Python >= 3.11; found " + sys.version.split()[0])'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "installing Python packages into $(VENV)"
	@$(PY) -m pip install -q --upgrade pip
	@$(PY) -m pip install -q -e '.[test]'
	@touch $(STAMP)

demo: setup
	$(VENV)/bin/trainfab demo

paper: setup
	$(VENV)/bin/trainfab paper -j $(JOBS) --markdown docs/results.md

timing: setup
	$(VENV)/bin/trainfab timing -j $(JOBS) --markdown docs/timing.md

# worksteal: idle workers take tests queued on busy ones (the testbench runs are long)
PYTEST := $(PY) -m pytest -q -n $(JOBS) --dist worksteal

test: setup
	$(PYTEST)

test-full: setup
	$(PYTEST) --effort full

bench: setup
	$(VENV)/bin/trainfab bench

docs: setup
	$(VENV)/bin/trainfab docs

DIGITS_MODELS := mlp cnn cnn-q4
# rows of each operand the FPRaker study keeps of resnet's GEMMs (drawn at random, seeded)
SAMPLE_ROWS := 128
TRAIN_DIR := build/training
#: the formats of the four designs and their baselines (make training); FAST Table II's other
#: formats (make training-baselines)
PAPER_FORMATS := fp32,bf16,fpraker,hbfp8,hbfp12,fast,fast-low,fast-high,schrodinger,bitwave
TABLE_II_FORMATS := fp32,int8,int12,hfp8,fp16,mid-bfp,msfp12,hfp8-e4m2
TF := $(VENV)/bin/trainfab

training: setup
	@echo "make training [1/4]: lenet on Fashion-MNIST in every format (about 50 min; each format prints its time left)"
	$(TF) train --model lenet --dataset fashion-mnist --formats $(PAPER_FORMATS) --epochs 3 --stop-after fpraker=1 \
	  -j $(JOBS) --capture $(TRAIN_DIR)/lenet/capture -o $(TRAIN_DIR)/lenet
	@echo "make training [2/4]: FPRaker's speedup and FAST's time on lenet's captures (about 3 min)"
	$(TF) speedup $(TRAIN_DIR)/lenet/capture/fpraker -o $(TRAIN_DIR)/lenet/speedup
	$(TF) speedup $(TRAIN_DIR)/lenet/capture/fpraker --max-rows $(SAMPLE_ROWS) \
	  -o $(TRAIN_DIR)/lenet/speedup-sampled
	$(TF) study fast-time $(TRAIN_DIR)/lenet -o $(TRAIN_DIR)/lenet/fast-time
	@echo "make training [3/4]: resnet on 20,000 Fashion-MNIST images in fp32 and bf16, FPRaker on its bf16 GEMMs (about 20 min)"
	$(TF) train --model resnet --dataset fashion-mnist --limit 25000 --formats fp32,bf16 --epochs 2 \
	  -j $(JOBS) --capture $(TRAIN_DIR)/resnet/capture -o $(TRAIN_DIR)/resnet
	$(TF) speedup $(TRAIN_DIR)/resnet/capture/bf16 --max-rows $(SAMPLE_ROWS) \
	  -o $(TRAIN_DIR)/resnet/speedup
	@echo "make training [4/4]: the HBFP error study and docs/training.md"
	$(TF) study hbfp -o $(TRAIN_DIR)/hbfp
	$(PY) -m flows.studies.train.report $(TRAIN_DIR) docs/training.md

training-baselines: setup
	@test -f $(TRAIN_DIR)/lenet/train.json || { echo "make training-baselines compares with make training's lenet run: $(TRAIN_DIR)/lenet/train.json is missing"; exit 1; }
	@echo "make training-baselines [1/3]: lenet on Fashion-MNIST in FAST Table II's other formats (about 25 min; each format prints its time left)"
	$(TF) train --model lenet --dataset fashion-mnist --formats $(TABLE_II_FORMATS) --epochs 3 \
	  -j $(JOBS) -o $(TRAIN_DIR)/lenet-baselines
	@echo "make training-baselines [2/3]: the fMAC and the 16-MAC units of FAST's Table IV (about 8 min)"
	$(TF) area fast.fmac --set m_max=4 -o $(TRAIN_DIR)/areas/fast.fmac-m4
	@for f in hfp8 int12 bf16 fp16; do \
	  $(TF) area baseline.mac16 --set fmt=$$f -o $(TRAIN_DIR)/areas/mac16-$$f || exit 1; \
	done
	@echo "make training-baselines [3/3]: FAST's time to accuracy against every array's own run, and docs/training.md"
	$(TF) study fast-time $(TRAIN_DIR)/lenet --with $(TRAIN_DIR)/lenet-baselines \
	  --areas $(TRAIN_DIR)/areas -o $(TRAIN_DIR)/lenet-baselines/fast-time
	$(PY) -m flows.studies.train.report $(TRAIN_DIR) docs/training.md

comma := ,
empty :=
space := $(empty) $(empty)
SWEEP_LIMIT := 12000
HBFP_SWEEP := fp32,$(subst $(space),$(comma),$(foreach m,4 8 12,$(foreach t,16 64 576,hbfp$(m)-t$(t)-rne hbfp$(m)-t$(t)-w$(m)-rne)))
FAST_SWEEP := fp32,$(subst $(space),$(comma),$(foreach a,0.4 0.6 0.8,$(foreach b,0.15 0.3 0.45,fast-a$(a)-b$(b))))
BFP_SWEEP := fp32,$(subst $(space),$(comma),$(foreach m,2 3 4 5,$(foreach g,8 16 32,bfp-m$(m)-g$(g))))

training-sweeps: setup
	@echo "make training-sweeps [1/3]: HBFP (round to nearest), mantissa 4/8/12 x block 16/64/576 x weight storage, lenet on $(SWEEP_LIMIT) images (about 20 min)"
	$(TF) train --model lenet --dataset fashion-mnist --limit $(SWEEP_LIMIT) --epochs 3 \
	  --formats $(HBFP_SWEEP) -j $(JOBS) -o $(TRAIN_DIR)/sweeps/hbfp
	@echo "make training-sweeps [2/3]: FAST, Algorithm 1's alpha x beta, lenet on $(SWEEP_LIMIT) images (about 10 min)"
	$(TF) train --model lenet --dataset fashion-mnist --limit $(SWEEP_LIMIT) --epochs 3 \
	  --formats $(FAST_SWEEP) -j $(JOBS) -o $(TRAIN_DIR)/sweeps/fast
	@echo "make training-sweeps [3/3]: FAST's datapath, width 2-5 x group 8/16/32 (Fig. 20), lenet on $(SWEEP_LIMIT) images (about 10 min)"
	$(TF) train --model lenet --dataset fashion-mnist --limit $(SWEEP_LIMIT) --epochs 3 \
	  --formats $(BFP_SWEEP) -j $(JOBS) -o $(TRAIN_DIR)/sweeps/bfp
	$(PY) -m flows.studies.train.report $(TRAIN_DIR) docs/training.md

training-digits: setup
	@for m in $(DIGITS_MODELS); do \
	  $(TF) train --model $$m --formats all -j $(JOBS) --capture $(TRAIN_DIR)/digits/$$m/capture \
	    -o $(TRAIN_DIR)/digits/$$m || exit 1; \
	  $(TF) speedup $(TRAIN_DIR)/digits/$$m/capture/fpraker -o $(TRAIN_DIR)/digits/$$m/speedup || exit 1; \
	  $(TF) study fast-time $(TRAIN_DIR)/digits/$$m -o $(TRAIN_DIR)/digits/$$m/fast-time || exit 1; \
	done
	$(PY) -m flows.studies.train.report $(TRAIN_DIR) docs/training.md

STUDY_DIR := build/studies

studies: setup
	@for m in $(DIGITS_MODELS); do \
	  test -d $(TRAIN_DIR)/digits/$$m/capture/fpraker || { echo "make studies reads the captures of make training-digits: $(TRAIN_DIR)/digits/$$m/capture/fpraker is missing"; exit 1; }; \
	done
	@echo "make studies [1/5]: Equinox's dispatch study (under a minute)"
	$(TF) study dispatch -o $(STUDY_DIR)/dispatch
	@echo "make studies [2/5]: the FPRaker rows study on synthetic operands and on cnn's captures (under a minute)"
	$(TF) study fpraker-rows -o $(STUDY_DIR)/fpraker-rows
	$(TF) study fpraker-rows $(TRAIN_DIR)/digits/cnn/capture/fpraker -o $(STUDY_DIR)/fpraker-rows-cnn
	@echo "make studies [3/5]: FPRaker's speedup with independent PEs on the digits captures (about 3 min)"
	@for m in $(DIGITS_MODELS); do \
	  $(TF) speedup $(TRAIN_DIR)/digits/$$m/capture/fpraker --set sync=independent \
	    -o $(STUDY_DIR)/speedup-independent/$$m || exit 1; \
	done
	@echo "make studies [4/5]: the interleaved 8 x 8 tile's cycles per group, printed (pipeline 1, contexts 4; seconds)"
	$(PY) -c "from flows.work import tile_work; print('\n'.join(f'{label}: {512 / w:.2f} cycles per group, {w:.1f} MACs per cycle' for label, w in tile_work({'pipeline': 1, 'contexts': 4})))"
	@echo "make studies [5/5]: the 8 x 8 FPRaker tile with independent PEs, by block (about 40 min)"
	$(TF) area fpraker.tile --set sync=independent --breakdown -o $(STUDY_DIR)/tile-independent

clean:
	rm -rf build .pytest_cache
