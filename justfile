# Mowdeck tasks. `just --list` shows them.

venv := ".venv"
py := venv + "/bin/python"

# Create the virtual environment and install Mowdeck with the test tools.
install:
    python3 -m venv {{venv}}
    {{py}} -m pip install -e '.[dev]'

# Run every test (real NATS and PostgreSQL).
test *args:
    {{py}} -m pytest {{args}}

# Lint, format check and strict types.
lint:
    {{venv}}/bin/ruff check .
    {{venv}}/bin/ruff format --check .
    {{venv}}/bin/mypy

# Format the code.
fmt:
    {{venv}}/bin/ruff format .
    {{venv}}/bin/ruff check --fix .

# Run every benchmark at full size (minutes); pass --smoke for a quick check.
bench *args:
    for b in tests/bench/*.py; do n=$(basename $b .py); [ "$n" = "__init__" ] || {{py}} -m tests.bench.$n {{args}}; done

# Everything with simulated mowers.
demo *args:
    {{venv}}/bin/mowdeck demo {{args}}

# Apply the SQL migrations to MOWDECK_DATABASE_URL.
migrate:
    {{venv}}/bin/mowdeck migrate

# Regenerate the v1 JSON Schemas.
schemas:
    {{venv}}/bin/mowdeck contracts export

# What CI runs, on a fresh virtual environment.
ci:
    bash .ci/run

# Regenerate the Grafana dashboards under deploy/grafana/dashboards.
dashboards:
    {{venv}}/bin/mowdeck dashboards export

# 30 minutes of 1,000 simulated mowers at a realistic load: each process's memory, open
# files, tasks and threads, the streams' and tables' sizes (report in .soak/report.md).
soak *args:
    {{py}} -m tests.soak --seconds 1800 {{args}}

# The chaos run: the production topology as processes, every fault kind under load, then
# the invariant check (docs/reliability.md). the CI-sized run is `--minutes 3`; this one is longer
# and repeats the faults. Pass --seed S to replay a run.
chaos *args:
    {{py}} -m tests.chaos.run --minutes 20 {{args}}
