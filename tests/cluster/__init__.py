"""The single-node cluster end-to-end test (``make cluster-e2e``): a real kubelet node.

Not part of ``make test`` (pyproject's testpaths): it needs root, containerd, the node
binaries and the images, and changes the host while it runs (see ``cluster.py``).
"""
