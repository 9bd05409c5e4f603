# syntax=docker/dockerfile:1
#
# Image for the Python cluster-proportional-autoscaler, a drop-in replacement for
# registry.k8s.io/cpa/cluster-proportional-autoscaler:
#   - /cluster-proportional-autoscaler is the daemon (same path as upstream), and the
#     ENTRYPOINT, so both `command: [/cluster-proportional-autoscaler, ...]` and
#     `args: [...]` manifests work unchanged;
#   - runs as 65534:65534 (nobody) and writes nothing: bytecode is compiled at build
#     time, PYTHONDONTWRITEBYTECODE=1, HOME=/tmp; works with readOnlyRootFilesystem;
#   - health server on :8080 (/healthz, /last-poll).
#
# Build:
#   docker build -t cluster-proportional-autoscaler-py:dev .
#
# Base image. Pin it by digest for reproducible, reviewable builds. The digest below is a
# PLACEHOLDER (this repository was written without registry access): look up the current
# one with
#   docker buildx imagetools inspect python:3.11-slim     (the "Digest:" line)
# or `crane digest python:3.11-slim`, and put it here. Until then, build with an explicit
#   --build-arg PYTHON_IMAGE=python:3.11-slim
# (scripts/e2e-kind.sh does that automatically while the placeholder is present).
# Builder and runtime must use the same image: the virtualenv points at its interpreter.
ARG PYTHON_IMAGE=python:3.11-slim@sha256:<digest-placeholder>

# ---------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS builder

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /src
# .dockerignore is an allow-list: only pyproject.toml, README/LICENSE and cpa/ arrive here.
COPY . /src

# Build a wheel of this repository, then install it and its dependencies into a
# self-contained virtualenv. The venv drops pip/setuptools: nothing installs at runtime.
RUN python -m pip wheel --no-deps --wheel-dir /wheels /src \
 && python -m venv /opt/venv \
 && /opt/venv/bin/pip install /wheels/*.whl \
 && /opt/venv/bin/pip uninstall --yes pip setuptools \
 && find /opt/venv -depth -type d -name __pycache__ -exec rm -rf '{}' + \
 && /opt/venv/bin/python -m compileall -q --invalidation-mode unchecked-hash /opt/venv/lib \
 && /opt/venv/bin/cluster-proportional-autoscaler --version

# ---------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime

ARG PYTHON_IMAGE
ARG VERSION=0.1.0
ARG VCS_REF=unknown
ARG BUILD_DATE=unknown

LABEL org.opencontainers.image.title="cluster-proportional-autoscaler-py" \
      org.opencontainers.image.description="Drop-in replacement for the Kubernetes cluster-proportional-autoscaler, in Python" \
      org.opencontainers.image.source="https://github.com/example/cluster-proportional-autoscaler-py" \
      org.opencontainers.image.url="https://github.com/example/cluster-proportional-autoscaler-py" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${VCS_REF}" \
      org.opencontainers.image.created="${BUILD_DATE}" \
      org.opencontainers.image.base.name="${PYTHON_IMAGE}"

# The official slim image ships the standard library without .pyc files; compile them
# once here (as root) so a read-only container never needs to write or recompile them.
# pip/setuptools/wheel are not needed at runtime.
RUN python -m pip uninstall --yes --no-cache-dir pip setuptools wheel \
 && python -m compileall -q --invalidation-mode unchecked-hash /usr/local/lib/python3.11

COPY --from=builder /opt/venv /opt/venv
RUN ln -s /opt/venv/bin/cluster-proportional-autoscaler /cluster-proportional-autoscaler

ENV PATH=/opt/venv/bin:${PATH} \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp

WORKDIR /tmp
USER 65534:65534
EXPOSE 8080
ENTRYPOINT ["/cluster-proportional-autoscaler"]
