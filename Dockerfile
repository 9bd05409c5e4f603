# Image for the Python cluster-proportional-autoscaler, a drop-in replacement for
# registry.k8s.io/cpa/cluster-proportional-autoscaler:
#   - /cluster-proportional-autoscaler is the daemon (same path as upstream) and the
#     ENTRYPOINT, so both `command: [/cluster-proportional-autoscaler, ...]` and
#     `args: [...]` manifests work unchanged;
#   - /cpvpa is the vertical autoscaler, at the path of the
#     cluster-proportional-vertical-autoscaler image (`command: [/cpvpa, ...]`);
#   - runs as 65534:65534 (nobody) and writes nothing: every module is compiled at build
#     time, PYTHONDONTWRITEBYTECODE=1, HOME=/tmp; works with readOnlyRootFilesystem;
#   - health server on :8080 (/healthz, /last-poll);
#   - distroless-style: the runtime is FROM scratch with only Debian's CPython, the shared
#     libraries it links, the standard library and a virtualenv; no shell, no package
#     manager (kubectl exec has nothing to run: debug with an ephemeral container).
#
# Build (see README, "Container image"):
#   docker build -t cluster-proportional-autoscaler-py:dev .
#   podman build -t cluster-proportional-autoscaler-py:dev .
#   make image          # docker when an engine answers, else buildah; works offline-ish
#
# One base, from Debian's packages only: a machine without registry access can make a
# faithful stand-in with mmdebstrap (make image does). Builder and runtime share the
# interpreter: the runtime's files are copied out of this very image.
ARG BASE_IMAGE=debian:bookworm-slim

# ---------------------------------------------------------------------------------------
FROM ${BASE_IMAGE} AS builder

ENV DEBIAN_FRONTEND=noninteractive \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv \
 && rm -rf /var/lib/apt/lists/*

# .dockerignore is an allow-list: pyproject.toml, README.md, cpa/ and image/ arrive here.
COPY . /src

# The virtualenv holds the pinned runtime dependencies (image/requirements.txt) and the
# autoscaler itself; pip and setuptools leave again: nothing installs at runtime.
RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-deps --require-virtualenv -r /src/image/requirements.txt \
 && /opt/venv/bin/pip install --no-deps --require-virtualenv /src \
 && /opt/venv/bin/pip uninstall --yes pip setuptools \
 && /opt/venv/bin/cluster-proportional-autoscaler --version \
 && /opt/venv/bin/cpvpa --version \
 && sh /src/image/rootfs.sh /rootfs /opt/venv

# ---------------------------------------------------------------------------------------
FROM scratch AS runtime

ARG BASE_IMAGE
ARG VERSION=0.1.0
ARG VCS_REF=unknown
ARG BUILD_DATE=unknown

LABEL org.opencontainers.image.title="cluster-proportional-autoscaler-py" \
      org.opencontainers.image.description="Drop-in replacement for the Kubernetes cluster-proportional-autoscaler, in Python" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${VCS_REF}" \
      org.opencontainers.image.created="${BUILD_DATE}" \
      org.opencontainers.image.base.name="${BASE_IMAGE}"

COPY --from=builder /rootfs /

ENV PATH=/opt/venv/bin:/usr/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONUTF8=1 \
    HOME=/tmp

WORKDIR /tmp
USER 65534:65534
EXPOSE 8080
ENTRYPOINT ["/cluster-proportional-autoscaler"]
