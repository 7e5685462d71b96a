# Two entry points: `make demo` (the main job on the embedded default) and `make test`.
# Both install whatever is missing first: into the active virtual environment, else into the project's
# own .venv (a distribution's system Python refuses pip installs, PEP 668).
ifdef VIRTUAL_ENV
PYTHON := $(VIRTUAL_ENV)/bin/python
else
PYTHON := .venv/bin/python
$(PYTHON):
	python3 -m venv .venv || { echo "make: python3 -m venv failed; install your distribution's venv package \
	(Debian, Ubuntu: apt-get install python3-venv) or activate a virtual environment" >&2; exit 1; }
endif
# the demo needs the package alone; the tests also need the test tools and ROS 2 (rclpy wheels, ~250 MB)
RUNTIME := .make/runtime$(subst /,_,$(PYTHON))
STAMP := .make/installed$(subst /,_,$(PYTHON))
RECOVERY := $(PYTHON) -m recovery

.PHONY: install demo test test-fast bench clean

$(RUNTIME): setup.py critics/_nearest.c | $(PYTHON)
	$(PYTHON) -m pip install -q -e .
	@mkdir -p .make && touch $@

$(STAMP): setup.py critics/_nearest.c | $(PYTHON)
	$(PYTHON) -m pip install -q -e '.[test,ros]'
	@mkdir -p .make && touch $@ $(RUNTIME)

install: $(STAMP)

# The main job: the embedded policy on every libero_object task, init states 0-4 (as many as fit ~5 minutes on
# 2 cores here), under the action-noise burst, without recovery (selector none), with the hand rule and with
# the learned selector (ppo): 50 paired episodes a column, compared episode by episode;
# then the published table (init states 0-49, 500 episodes a column, made by this code: reports/shipped/) and,
# last, whether every live episode reproduces the published one exactly (make fails loudly where one does not).
DEMO := $(RECOVERY) eval --suite libero_object --episodes 5 --workers 2 --policy embedded \
	--disturbance action_noise --out results/demo.jsonl --no-progress
PUBLISHED := $(foreach s,none rule ppo,$(wildcard reports/shipped/libero_object_$(s)_*.jsonl))

demo: $(RUNTIME)
	$(DEMO) --selector none
	$(DEMO) --selector rule
	$(DEMO) --selector ppo
	@printf '\n== live: 50 paired episodes a column (libero_object, init states 0-4 of every task, action-noise burst) ==\n'
	@$(RECOVERY) compare results/demo.jsonl --out results/demo_comparison.md
	@printf '\n== published (reports/shipped/: init states 0-49 of every task, 500 episodes per column) ==\n'
	@$(RECOVERY) compare $(PUBLISHED)
	@printf '\n== do the live episodes reproduce the published run? ==\n'
	@$(RECOVERY) reproduce results/demo.jsonl $(PUBLISHED)

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
