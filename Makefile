.PHONY: setup demo test bench lint docs
setup:
	./scripts/setup
demo: setup
	.venv/bin/toolray demo
test:
	./scripts/test
lint:
	.venv/bin/ruff check . && .venv/bin/ruff format --check . && .venv/bin/mypy
bench:
	.venv/bin/python benchmarks/run_all.py --quick
docs:
	.venv/bin/python scripts/gen_docs.py && .venv/bin/mkdocs serve
