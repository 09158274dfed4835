# Caldera: `make demo` runs the portal, `make test` runs the tests.
# With DATABASE_URL / REDIS_URL unset, both start a private PostgreSQL and Redis
# (python -m portal.embedded); with them set, both use those servers.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
EMBEDDED := $(PY) -m portal.embedded run --

.PHONY: venv demo test test-fast imports types bench lint format clean lock messages messages-update

venv: $(VENV)/.installed

# Everything from the lock, every file checked against its hash (runtime, demo, dev); then
# the portal and the `caldera` command (client/, whose requests and PyYAML the lock holds).
$(VENV)/.installed: pyproject.toml client/pyproject.toml requirements/dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --require-hashes -r requirements/dev.txt
	$(PY) -m pip install --quiet --no-deps -e . -e ./client
	mkdir -p staticfiles
	touch $@

# After a change of pyproject.toml's pins: the image's lock (runtime) and make's and CI's
# (runtime, demo and dev), with hashes.
TOOLS := .caldera/lock-tools
LOCK := $(TOOLS)/bin/pip-compile --quiet --generate-hashes --strip-extras --allow-unsafe \
	--no-emit-index-url --no-emit-find-links
lock:
	test -x $(TOOLS)/bin/pip-compile || \
		($(PYTHON) -m venv $(TOOLS) && $(TOOLS)/bin/pip install --quiet pip-tools)
	$(LOCK) --output-file requirements/runtime.txt pyproject.toml
	$(LOCK) --extra demo --extra dev --output-file requirements/dev.txt pyproject.toml

demo: venv messages
	DEBUG=$${DEBUG:-1} $(EMBEDDED) $(PY) manage.py demo

# PART=engine narrows the tests to one part, a folder of tests/ (several: PART="rule engine").
PARTS := $(sort $(patsubst tests/%/,%,$(dir $(wildcard tests/*/test_*.py))))
ifneq ($(filter test test-fast,$(MAKECMDGOALS)),)
ifneq ($(filter-out $(PARTS),$(PART)),)
$(error PART=$(PART): tests/ has no part $(filter-out $(PARTS),$(PART)); the parts are: $(PARTS))
endif
endif

# The admission and sync tests run a second time with every connection through a PgBouncer
# in transaction pooling mode (tests/support/pooler.py), as a platform's pooler would.
POOLED = tests/engine/test_admission_cycle.py tests/engine/test_end_to_end.py \
	tests/engine/test_reclaim_cycle.py tests/engine/test_quota_promise.py \
	tests/engine/test_unrunnable_jobs.py tests/cluster/test_namespace_trouble.py \
	tests/cluster/test_kubernetes_backend.py

test: venv imports types messages
	CALDERA_STATE_DIR=$${CALDERA_STATE_DIR:-.caldera/test} SECRET_KEY=$${SECRET_KEY:-test-only-secret} \
		$(EMBEDDED) $(PY) -m pytest $(addprefix tests/,$(PART)) $(PYTEST_ARGS)
	$(if $(PART),,CALDERA_STATE_DIR=$${CALDERA_STATE_DIR:-.caldera/test} SECRET_KEY=$${SECRET_KEY:-test-only-secret} \
		$(EMBEDDED) $(PY) -m pytest --through-pgbouncer $(POOLED) $(PYTEST_ARGS))

# The import contracts of pyproject.toml: layers, no circles; a broken one prints its chain.
imports: venv
	$(VENV)/bin/lint-imports --no-cache

# The types: mypy with the Django and DRF plugins ([tool.mypy] in pyproject.toml), strict on
# the rules and the quota arithmetic. The plugins import the settings, which read these from
# the environment; nothing connects to them.
types: venv
	SECRET_KEY=$${SECRET_KEY:-types-only} DATABASE_URL=$${DATABASE_URL:-postgres://localhost/types} \
		REDIS_URL=$${REDIS_URL:-redis://localhost/0} $(VENV)/bin/mypy

# The translations: locale/<language>/LC_MESSAGES/django.po, written by people, compiled
# here into the .mo files Django reads (never committed, never edited: .gitignore).
# msgfmt is GNU gettext's (Debian: gettext); --check refuses a translation whose
# placeholders differ from its message's.
CATALOGUES := $(wildcard locale/*/LC_MESSAGES/*.po)
messages: $(CATALOGUES:.po=.mo)

locale/%.mo: locale/%.po
	@command -v msgfmt >/dev/null || { echo "msgfmt is missing: install GNU gettext (apt-get install gettext)"; exit 1; }
	msgfmt --check --output-file $@ $<

# After marking words for translation: every marked message of the code and the templates
# into the Chinese catalogue, new ones with an empty translation to write, the existing
# kept (tests/portal/test_translations.py fails until each has its translation). The
# settings read these from the environment; nothing connects to them.
MESSAGES_IGNORED := .venv client bench tests docs static staticfiles deploy k8s node_modules
messages-update:
	SECRET_KEY=$${SECRET_KEY:-messages-only} DATABASE_URL=$${DATABASE_URL:-postgres://localhost/messages} \
		REDIS_URL=$${REDIS_URL:-redis://localhost/0} $(PY) manage.py makemessages --locale zh_Hans \
		--add-location file --no-obsolete $(foreach d,$(MESSAGES_IGNORED),--ignore '$(d)/*')

# The benchmarks (docs/benchmarks.md); FULL=1 adds the large scenarios. Never part of test.
bench: venv
	CALDERA_STATE_DIR=$${CALDERA_STATE_DIR:-.caldera/bench} \
		$(EMBEDDED) $(PY) -m bench $(if $(FULL),--full) $(BENCH_ARGS)

# Everything but the browser tests, for a quick loop.
test-fast: PYTEST_ARGS = -m "not browser"
test-fast: test

lint: venv
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .

format: venv
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

clean:
	rm -rf .caldera staticfiles .mypy_cache locale/*/LC_MESSAGES/*.mo
