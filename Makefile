# Two entry points: `make demo` (the main job on the embedded default) and `make test`.
# Both install whatever is missing first.
PYTHON ?= python3
STAMP := .make/installed

.PHONY: install demo test test-fast bench clean

$(STAMP): setup.py
	$(PYTHON) -m pip install -q -e '.[test,ros]'
	@mkdir -p .make && touch $(STAMP)

install: $(STAMP)

# The main job at a small scale: the embedded policy on 2 libero_object tasks, 3 init states each,
# nominal and under the action-noise burst, without (selector none) and with (rule) recovery.
DEMO := recovery eval --suite libero_object --tasks 0 1 --episodes 3 --workers 2 --policy embedded \
	--out results/demo.jsonl --no-progress

demo: $(STAMP)
	$(DEMO) --selector none
	$(DEMO) --selector rule
	$(DEMO) --selector none --disturbance action_noise
	$(DEMO) --selector rule --disturbance action_noise
	recovery compare results/demo.jsonl --out results/demo_comparison.md

test: $(STAMP)
	$(PYTHON) -m pytest -q

# The fast tier (under a minute on 2 cores): the loop, supervisor, selectors and rollback on a kinematic
# robot, the import contracts and every other test that needs neither MuJoCo nor ROS nor training.
test-fast: $(STAMP)
	$(PYTHON) -m pytest -q -m "not sim and not ros and not slow"

bench: $(STAMP)
	$(PYTHON) benchmarks/eval_loop_speed.py

clean:
	rm -rf .make results build *.egg-info
