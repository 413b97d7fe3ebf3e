# gemma-sre: the bot itself, as a Cloud Run service.
FROM python:3.11-slim AS build
WORKDIR /src
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# Every library at the version and file hash the tests ran with (requirements-runtime.lock: the runtime part of
# requirements.lock, written by ./dev lock), then the project itself without resolving anything.
COPY requirements-runtime.lock ./
RUN python -m venv /opt/venv && /opt/venv/bin/pip install --no-compile --require-hashes -r requirements-runtime.lock
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY handlers ./handlers
COPY skills ./skills
COPY prompts ./prompts
RUN /opt/venv/bin/pip install --no-compile --no-deps .

FROM python:3.11-slim
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PORT=8080 MPLBACKEND=Agg
RUN useradd --system --uid 10001 --home-dir /app --create-home gemma
COPY --from=build /opt/venv /opt/venv
COPY runbooks /app/runbooks
USER 10001
WORKDIR /app
EXPOSE 8080
# Cloud Run sets $PORT; `serve` reads it through the PORT setting.
CMD ["gemma-sre", "serve"]
