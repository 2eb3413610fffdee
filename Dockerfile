# The orga worker image: `docker build -t orga-worker .`
FROM python:3.11-slim

RUN pip install --no-cache-dir uv
WORKDIR /app

# Dependencies first, so code changes do not reinstall them.
COPY pyproject.toml uv.lock README.md ./
RUN uv sync --locked --no-dev --no-install-project

COPY orga ./orga
COPY examples ./examples
COPY worker.py ./
# Bytecode at build: the workflow sandbox imports orga's workflow modules again for every loop
# it starts, and would compile their sources each time without it.
RUN uv sync --locked --no-dev \
    && /app/.venv/bin/python -m compileall -q orga worker.py

ENV PATH=/app/.venv/bin:$PATH \
    PYTHONUNBUFFERED=1
# SIGTERM (docker stop) shuts the worker down gracefully.
STOPSIGNAL SIGTERM
CMD ["python", "worker.py"]
