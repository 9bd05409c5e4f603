# Image for the Python cluster-proportional-autoscaler, a drop-in replacement for
# registry.k8s.io/cpa/cluster-proportional-autoscaler (docs/container-image.md):
#   - /cluster-proportional-autoscaler is the daemon (same path as upstream) and the
#     ENTRYPOINT, so both `command: [/cluster-proportional-autoscaler, ...]` and
#     `args: [...]` manifests work unchanged;
#   - /cpvpa is the vertical autoscaler, at the path of the
#     cluster-proportional-vertical-autoscaler image (`command: [/cpvpa, ...]`);
#   - runs as 65534:65534 (nobody) and writes nothing: every module is compiled at build
#     time, PYTHONDONTWRITEBYTECODE=1, HOME=/tmp; works with readOnlyRootFilesystem;
#   - health server on :8080 (/healthz, /last-poll, /metrics);
#   - distroless-style: FROM scratch with only Debian's CPython, the shared libraries it
#     needs (libgcc_s among them), the standard library and a virtualenv; no shell, no
#     package manager (debug with an ephemeral container); /LICENSES holds the licence
#     texts of everything shipped and the SPDX SBOM.
#
# Multi-platform, without emulation: the builder runs on the BUILD machine's platform and
# assembles the TARGET platform's root filesystem from Debian's packages for that
# architecture and that platform's wheels (image/ocibuild; `make image` runs the same code
# without a Docker engine and writes the index itself):
#   docker buildx build -t NAME:TAG \
#     --platform linux/amd64,linux/arm64,linux/arm/v7,linux/ppc64le,linux/s390x .
ARG BASE_IMAGE=debian:bookworm-slim

# ---------------------------------------------------------------------------------------
FROM --platform=$BUILDPLATFORM ${BASE_IMAGE} AS builder

ENV DEBIAN_FRONTEND=noninteractive \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

# The cross compilers build the C extensions that PyPI has no wheel of for arm/v7, ppc64le
# and s390x (image/ocibuild/wheels.py); this step does not depend on the target, so one
# layer serves every platform of a multi-platform build.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-pip mmdebstrap binutils \
      ca-certificates gcc-arm-linux-gnueabihf gcc-powerpc64le-linux-gnu gcc-s390x-linux-gnu \
 && rm -rf /var/lib/apt/lists/*

# .dockerignore is an allow-list: pyproject.toml, README.md, LICENSE, cpa/ and image/.
COPY . /src

ARG TARGETPLATFORM
ARG SOURCE_DATE_EPOCH=0
ARG VERSION=0.1.0
ARG IMAGE_NAME=ghcr.io/cpa-py/cluster-proportional-autoscaler-py
RUN cd /src && PYTHONPATH=image python3 -m ocibuild rootfs --platform "$TARGETPLATFORM" \
      --work /work --dest /rootfs --epoch "$SOURCE_DATE_EPOCH" --name "$IMAGE_NAME" \
      --version "$VERSION"

# ---------------------------------------------------------------------------------------
FROM scratch AS runtime

ARG VERSION=0.1.0
ARG VCS_REF=unknown

LABEL org.opencontainers.image.title="cluster-proportional-autoscaler-py" \
      org.opencontainers.image.description="Drop-in replacement for the Kubernetes cluster-proportional-autoscaler, in Python" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${VCS_REF}" \
      org.opencontainers.image.base.name="debian:bookworm (packages, extracted)"

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
