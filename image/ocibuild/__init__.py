"""Build the container image as an OCI image index, one image per CPU architecture.

Why not `docker build`/`buildah bud` for every platform: their RUN steps would execute the
target's binaries under emulation. Here every platform's root filesystem is assembled on
the build machine without running any of its code: Debian's packages for that
architecture are extracted (mmdebstrap's `extract` variant), the Python dependencies come
as that platform's wheels (or are cross-compiled, see ``wheels``), and the layers, configs,
manifests and the index are written by ``oci`` with fixed timestamps and sorted entries, so
two builds of one commit give the same digests. The Dockerfile runs the same assembly
(``python3 -m ocibuild rootfs``) in a builder stage, so `docker buildx build` makes the
same file tree.
"""
