# One place for the everyday checks. `make check` runs what CI (.ci/run) runs, without installing.
.PHONY: format lint typecheck test check

format:
	uv run ruff format .
	uv run ruff check --fix .

lint:
	uv run ruff format --check .
	uv run ruff check .

typecheck:
	uv run pyright

test:
	uv run pytest

check: lint typecheck test
