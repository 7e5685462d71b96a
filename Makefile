# Two entry points: `make demo` (the main job on the embedded default) and `make test`.
# Both install whatever is missing first.
PYTHON ?= python3
STAMP := .make/installed

.PHONY: install demo test bench clean

$(STAMP): setup.py
	$(PYTHON) -m pip install -q -e '.[test]'
	@mkdir -p .make && touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	recovery eval --suite libero_object --tasks 0 1 --episodes 3 --workers 2 --out results/demo.jsonl

test: $(STAMP)
	$(PYTHON) -m pytest -q

bench: $(STAMP)
	$(PYTHON) benchmarks/eval_loop_speed.py

clean:
	rm -rf .make results build *.egg-info
