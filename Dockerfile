# syntax=docker/dockerfile:1
# The sidecar image. OPA is not in it: it runs as its own container (deploy/compose.yaml)
# or beside the sidecar in the same pod (deploy/k8s), and gets policies as a signed bundle.
#
#   docker build -t whose-sidecar:0.1.0 .
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
RUN python -m venv /opt/whose
COPY pyproject.toml requirements.lock README.md LICENSE ./
COPY sidecar ./sidecar
# What serving needs only (the `server` extra), every one pinned by the lock (used as a
# constraints file, so the test-only packages it also pins are not installed).
RUN /opt/whose/bin/pip install -c requirements.lock '.[server]' \
    && /opt/whose/bin/pip check

FROM ${PYTHON_IMAGE}
RUN groupadd --system --gid 10001 whose \
    && useradd --system --uid 10001 --gid whose --no-create-home \
       --home-dir /nonexistent --shell /usr/sbin/nologin whose \
    && mkdir -p /var/lib/whose && chown whose:whose /var/lib/whose
COPY --from=build /opt/whose /opt/whose
# Production defaults: listen on every interface of the container, Qdrant server store.
# Identity (WHOSE_JWT_*), WHOSE_OPA_URL, WHOSE_QDRANT_URL and WHOSE_REDIS_URL come from
# the deployment; see docs/operations.md. The image never runs with --dev.
ENV PATH=/opt/whose/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    WHOSE_HOST=0.0.0.0 \
    WHOSE_PORT=8080 \
    WHOSE_OPS_PORT=9180 \
    WHOSE_DATA_DIR=/var/lib/whose \
    WHOSE_STORE=server
USER 10001:10001
WORKDIR /var/lib/whose
EXPOSE 8080 9180
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request as r; r.urlopen('http://127.0.0.1:9180/healthz', timeout=2)"]
ENTRYPOINT ["whose", "serve"]
