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
# Every scenario, the longest first: five run at a time (MOLECULE_JOBS), so the long ones start
# together and the short ones fill in behind them. fleet's slot bakes the image that fleet,
# experiment, upgrade and default start from; they wait for it while sglang_server (plain lab
# image) and the checks keep both cores busy. readme and sglang (plain lab image, about 9 minutes
# each beside the others) start once the first long one ends: started first, they had left
# upgrade to start 9 minutes late and run alone at the end. SCENARIOS_APART leaves some out (e.g.
# SCENARIOS_APART=fleet).
SCENARIOS_LONGEST_FIRST := fleet sglang_server experiment upgrade default readme sglang proxmox gpu_vm
SCENARIOS_APART ?=
SCENARIOS ?= $(filter-out $(SCENARIOS_APART),$(SCENARIOS_LONGEST_FIRST) $(filter-out $(SCENARIOS_LONGEST_FIRST),$(sort $(notdir $(patsubst %/molecule.yml,%,$(wildcard molecule/*/molecule.yml))))))
# The ansible-core releases proven beside the controller's (see core-matrix).
CORE_MATRIX := 2.20 2.21
CORE_MATRIX_VENVS := $(foreach release,$(CORE_MATRIX),venv-core$(release))
CORE_MATRIX_SANITY := $(foreach release,$(CORE_MATRIX),sanity-core$(release))
CORE_MATRIX_UNIT := $(foreach release,$(CORE_MATRIX),unit-core$(release))
# Outside the checkout: inside it, ansible-test would see the copy as git-ignored and skip it.
COLLECTION_PATH := ansible_collections/inferops/serving
SANITY_ROOT_BASE := $(or $(TMPDIR),/tmp)/inferops-sanity
SANITY_ROOT := $(SANITY_ROOT_BASE)/$(COLLECTION_PATH)

export PATH := $(BIN):$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/.collections
export ANSIBLE_PIPELINING := 1
export ANSIBLE_FORCE_COLOR ?= 0
export PY_COLORS ?= 0
export LAB_IMAGE LAB_BAKED_IMAGE

.PHONY: help venv docker lab-image lab-baked-image lab-node lab-destroy lab-vm lab-vm-stop test-vm demo lint yamllint ansible-lint roles-lint sanity \
        unit collection-test changelog-lint core-matrix \
        $(CORE_MATRIX_VENVS) $(CORE_MATRIX_SANITY) $(CORE_MATRIX_UNIT) checks molecule test bench clean

help:
	@echo "make demo   - deploy the full stack to the local lab node gpu-node"
	@echo "make test   - yamllint, ansible-lint, ansible-test sanity, pytest, molecule (sanity and unit tests also on ansible-core 2.20, 2.21)"
	@echo "make bench  - benchmark table (lab node)"
	@echo "make lab-vm - start a QEMU guest with its own kernel, reached over SSH as a sudoer"
	@echo "make test-vm - deploy from nothing to a fresh QEMU guest (driver reboot, node lock, reboot recovery)"

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

# Not part of `make test`: a guest under TCG keeps a core busy for its whole run (about 18 minutes).
test-vm: venv
	@molecule/resources/lab-vm/test-vm.sh

demo: lab-node
	$(BIN)/ansible-playbook deploy.yml -l $(LAB_NODE)

yamllint: venv
	$(BIN)/yamllint -s .

ansible-lint: venv
	$(BIN)/ansible-lint --offline

# ansible-test wants the collection under ansible_collections/<namespace>/<name>:
# copy the tracked and new files there (never the venvs or caches).
define copy_for_ansible_test
@rm -rf $(1) && mkdir -p $(1)
@git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -C $(1) -xf -
endef

# The pip bootstrap of ansible-test's own venvs, one per pip release it pins: 24.2 (ansible-core
# 2.19), 25.2 (2.20, 2.21).
ANSIBLE_TEST_GET_PIP := $(foreach release,24_2 25_2,$(HOME)/.ansible/test/cache/get_pip_$(release).py)

$(HOME)/.ansible/test/cache/get_pip_%.py: scripts/ansible-test-get-pip.py
	@mkdir -p $(dir $@) && cp $< $@

sanity: venv $(ANSIBLE_TEST_GET_PIP)
	$(call copy_for_ansible_test,$(SANITY_ROOT))
	cd $(SANITY_ROOT) && $(BIN)/ansible-test sanity --python 3.11 --color no

# The newer ansible-core releases, each proven by the full `ansible-test sanity` and the unit tests in a
# venv of its own (.venv-core<release>), pinned in tests/core-matrix/requirements-<release>.txt. They
# need Python 3.12 or later on the controller, which Debian 12's python3 (3.11) is not:
# scripts/find-controller-python.sh picks one (CORE_MATRIX_PYTHON names it) and fails when there is none.
# Each run starts by naming its release and interpreter, and ends with its time.
core_matrix_banner = $(CURDIR)/.venv-core$(1)/bin/python -c 'import sys, ansible.release; \
  print("--- $(2) on ansible-core %s, Python %s (%s)" % (ansible.release.__version__, \
  sys.version.split()[0], sys._base_executable))'

$(CURDIR)/.venv-core%/.installed: tests/core-matrix/requirements-%.txt
	@$(CURDIR)/.venv-core$*/bin/python -c '' 2>/dev/null || { \
	  python=$$(scripts/find-controller-python.sh) && rm -rf $(CURDIR)/.venv-core$* \
	  && echo "ansible-core $*: venv .venv-core$* on $$python" && $$python -m venv $(CURDIR)/.venv-core$*; }
	$(CURDIR)/.venv-core$*/bin/python -m pip install -q -r $<
	@touch $@

$(CORE_MATRIX_VENVS): venv-core%: $(CURDIR)/.venv-core%/.installed .collections/ansible_collections/inferops/serving
	@:

$(CORE_MATRIX_SANITY): sanity-core%: venv-core% $(ANSIBLE_TEST_GET_PIP)
	@$(call core_matrix_banner,$*,ansible-test sanity)
	$(call copy_for_ansible_test,$(SANITY_ROOT_BASE)-core$*/$(COLLECTION_PATH))
	@start=$$SECONDS; cd $(SANITY_ROOT_BASE)-core$*/$(COLLECTION_PATH) && PATH=$(CURDIR)/.venv-core$*/bin:$$PATH \
	  $(CURDIR)/.venv-core$*/bin/ansible-test sanity --python "$$($(CURDIR)/.venv-core$*/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')" \
	    --color no; echo "--- ansible-test sanity on ansible-core $*: $$((SECONDS - start)) s"

# tests/unit/scripts (the repository's role linter), tests/unit/lab (the lab's simulators) and the tests
# marked no_ansible_core (the launcher, the node's collector, the real routers) run nothing of
# ansible-core: `make unit` runs them once.
$(CORE_MATRIX_UNIT): unit-core%: venv-core%
	@$(call core_matrix_banner,$*,unit tests)
	@start=$$SECONDS; PATH=$(CURDIR)/.venv-core$*/bin:$$PATH $(CURDIR)/.venv-core$*/bin/pytest tests/unit -q \
	  -p no:cacheprovider --ignore=tests/unit/scripts --ignore=tests/unit/lab -m 'not no_ansible_core'; \
	  echo "--- unit tests on ansible-core $*: $$((SECONDS - start)) s"

core-matrix: $(CORE_MATRIX_SANITY) $(CORE_MATRIX_UNIT)

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

# A scenario alone keeps about a third of a core busy (it waits on servers and timeouts). With four
# at a time, default could start only once fleet had ended and ran alone for its last minutes, long
# after the checks; with five, both cores stay busy until the last scenario's last minutes (docs/lab.md
# has the runs). MOLECULE_JOBS=1 runs them one after another.
MOLECULE_JOBS ?= 5

# A scenario whose nodes start from the baked image bakes it first, in its own slot.
molecule: venv lab-image
	@scripts/run-scenarios.sh $(MOLECULE_JOBS) $(SCENARIOS)

# What needs no lab node: linters, sanity, unit and collection tests, and the ansible-core matrix.
checks: lint unit collection-test core-matrix

# The lab image's debootstrap base builds while the venv installs (it needs no Python package).
# The checks run beside the lab layer's build (mostly downloads) and the scenarios; their log is
# printed after the scenarios' lines, and either failing fails the run. The checks run niced: the
# scenarios, which end last, get the CPU first, and the checks take what they leave.
test:
	@mkdir -p build
	@{ scripts/ensure-docker.sh && molecule/resources/lab/build-image.sh --base; } >build/lab-base.log 2>&1 & base=$$!; \
	  $(MAKE) --no-print-directory venv; \
	  { checks=0; nice -n 10 $(MAKE) --no-print-directory checks >build/checks.log 2>&1 || checks=$$?; echo $$checks >build/checks.rc; } & \
	  scenarios=0; { { wait $$base || { cat build/lab-base.log; false; }; } && $(MAKE) --no-print-directory lab-image \
	    && scripts/run-scenarios.sh $(MOLECULE_JOBS) $(SCENARIOS); } || scenarios=$$?; wait; \
	  echo "--- lint, sanity, unit and collection tests (build/checks.log)"; cat build/checks.log; \
	  test "$$(cat build/checks.rc)" = 0 && test "$$scenarios" = 0

bench: venv lab-image
	$(BIN)/python bench/deploy_bench.py
	$(BIN)/python bench/fleet_bench.py

clean: lab-destroy
	rm -rf build reports
