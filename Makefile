# inferops.serving — controller bootstrap, lab node, tests and benchmarks.
#
#   make demo    full deploy against the local lab node (Docker container `gpu-node`)
#   make test    lint, sanity, unit tests and every molecule scenario
#   make bench   rerunnable benchmark table (lab node; the topology row on a GPU host)

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := $(CURDIR)/.venv
BIN := $(VENV)/bin
LAB_IMAGE ?= inferops-lab:bookworm
# The lab node after one deploy, packages installed and nothing serving (bake-image.sh): the
# scenarios whose subject is not a fresh install start from it.
LAB_BAKED_IMAGE ?= inferops-lab-baked:bookworm
LAB_NODE ?= gpu-node
# Every scenario, the longest first: two run at a time, so the long ones start together and the
# short ones fill in behind them. sglang_server (plain lab image) goes second: it runs while
# fleet's slot bakes the image that fleet, default, experiment and upgrade start from.
# SCENARIOS_APART leaves some out (e.g. SCENARIOS_APART=fleet).
SCENARIOS_LONGEST_FIRST := fleet sglang_server default experiment upgrade readme sglang proxmox gpu_vm
SCENARIOS_APART ?=
SCENARIOS ?= $(filter-out $(SCENARIOS_APART),$(SCENARIOS_LONGEST_FIRST) $(filter-out $(SCENARIOS_LONGEST_FIRST),$(sort $(notdir $(patsubst %/molecule.yml,%,$(wildcard molecule/*/molecule.yml))))))
# Outside the checkout: inside it, ansible-test would see the copy as git-ignored and skip it.
SANITY_ROOT := $(or $(TMPDIR),/tmp)/inferops-sanity/ansible_collections/inferops/serving

export PATH := $(BIN):$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/.collections
export ANSIBLE_PIPELINING := 1
export ANSIBLE_FORCE_COLOR ?= 0
export PY_COLORS ?= 0
export LAB_IMAGE LAB_BAKED_IMAGE

.PHONY: help venv docker lab-image lab-baked-image lab-node lab-destroy lab-vm lab-vm-stop demo lint yamllint ansible-lint roles-lint sanity \
        unit collection-test changelog-lint checks molecule test bench clean

help:
	@echo "make demo   - deploy the full stack to the local lab node gpu-node"
	@echo "make test   - yamllint, ansible-lint, ansible-test sanity, pytest, molecule"
	@echo "make bench  - benchmark table (lab node)"
	@echo "make lab-vm - start a QEMU guest with its own kernel, reached over SSH as a sudoer"

$(BIN)/.installed: requirements.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || { \
	  echo "python3 -m venv failed: installing Debian's python3-venv"; \
	  rm -rf $(VENV); apt-get install -y -qq -o DPkg::Lock::Timeout=300 python3-venv >/dev/null && $(PYTHON) -m venv $(VENV); }
	$(BIN)/python -m pip install -q -r requirements.txt
	@touch $@

.collections/ansible_collections/inferops/serving:
	@mkdir -p $(dir $@)
	@ln -sfn ../../.. $@

venv: $(BIN)/.installed .collections/ansible_collections/inferops/serving

docker:
	@scripts/ensure-docker.sh

lab-image: docker
	@molecule/resources/lab/build-image.sh

lab-baked-image: venv lab-image
	@molecule/resources/lab/bake-image.sh

lab-node: venv lab-image
	@$(BIN)/ansible-playbook molecule/resources/lab/lab-node.yml -e lab_node_name=$(LAB_NODE) -e lab_image=$(LAB_IMAGE)

lab-destroy: venv
	@$(BIN)/ansible-playbook molecule/resources/lab/lab-node.yml -e lab_node_name=$(LAB_NODE) -e lab_node_state=absent

# A Debian 12 guest with its own kernel under QEMU, reached over SSH as an unprivileged sudoer
# (molecule/resources/lab-vm/): what a container cannot do, kernel modules and reboots.
LAB_VM ?= lab-vm
lab-vm:
	@molecule/resources/lab-vm/start-vm.sh start $(LAB_VM)

lab-vm-stop:
	@molecule/resources/lab-vm/start-vm.sh stop $(LAB_VM)

demo: lab-node
	$(BIN)/ansible-playbook deploy.yml -l $(LAB_NODE)

yamllint: venv
	$(BIN)/yamllint -s .

ansible-lint: venv
	$(BIN)/ansible-lint --offline

# ansible-test wants the collection under ansible_collections/<namespace>/<name>:
# copy the tracked and new files there (never the venv or caches).
ANSIBLE_TEST_GET_PIP := $(HOME)/.ansible/test/cache/get_pip_24_2.py

$(ANSIBLE_TEST_GET_PIP): scripts/ansible-test-get-pip.py
	@mkdir -p $(dir $@) && cp $< $@

sanity: venv $(ANSIBLE_TEST_GET_PIP)
	@rm -rf $(SANITY_ROOT) && mkdir -p $(SANITY_ROOT)
	@git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -C $(SANITY_ROOT) -xf -
	cd $(SANITY_ROOT) && $(BIN)/ansible-test sanity --python 3.11 --color no

changelog-lint: venv
	$(BIN)/antsibull-changelog lint

# Between roles and playbooks: argument specs against defaults, unread variables, private reads.
roles-lint: venv
	$(BIN)/python scripts/lint_roles.py

lint: yamllint ansible-lint roles-lint changelog-lint sanity

unit: venv
	$(BIN)/pytest tests/unit -q

collection-test: venv
	$(BIN)/pytest tests/collection -q

# The lab nodes mostly wait (boots, health polls, paced benchmarks): two scenarios at a time
# keep both cores busy. MOLECULE_JOBS=1 runs them one after another.
MOLECULE_JOBS ?= 2

# A scenario whose nodes start from the baked image bakes it first, in its own slot.
molecule: venv lab-image
	@scripts/run-scenarios.sh $(MOLECULE_JOBS) $(SCENARIOS)

# What needs no lab node: linters, sanity, unit and collection tests.
checks: lint unit collection-test

# The lab image's debootstrap base builds while the venv installs (it needs no Python package).
# The checks run beside the lab layer's build (mostly downloads) and the scenarios, whose lab
# nodes mostly wait; their log is printed after the scenarios' lines, and either failing fails the run.
test:
	@mkdir -p build
	@{ scripts/ensure-docker.sh && molecule/resources/lab/build-image.sh --base; } >build/lab-base.log 2>&1 & base=$$!; \
	  $(MAKE) --no-print-directory venv; \
	  { checks=0; $(MAKE) --no-print-directory checks >build/checks.log 2>&1 || checks=$$?; echo $$checks >build/checks.rc; } & \
	  scenarios=0; { { wait $$base || { cat build/lab-base.log; false; }; } && $(MAKE) --no-print-directory lab-image \
	    && scripts/run-scenarios.sh $(MOLECULE_JOBS) $(SCENARIOS); } || scenarios=$$?; wait; \
	  echo "--- lint, sanity, unit and collection tests (build/checks.log)"; cat build/checks.log; \
	  test "$$(cat build/checks.rc)" = 0 && test "$$scenarios" = 0

bench: venv lab-image
	$(BIN)/python bench/deploy_bench.py
	$(BIN)/python bench/fleet_bench.py

clean: lab-destroy
	rm -rf build reports
