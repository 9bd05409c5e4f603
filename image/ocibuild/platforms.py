"""The platforms the image index holds, and how each is named by each tool.

One table, because each tool spells an architecture its own way: OCI (``arm`` + variant
``v7``), Debian (``armhf``), the GNU triplet of library paths and Python's extension
suffix (``arm-linux-gnueabihf``), wheel tags (``armv7l``) and qemu (``arm``).
"""

from __future__ import annotations

import platform as _platform
from dataclasses import dataclass


@dataclass(frozen=True)
class Platform:
    oci_arch: str          # OCI/Go GOARCH: amd64, arm64, arm, ppc64le, s390x
    variant: str           # OCI variant ("v7" for arm), "" if none
    deb_arch: str          # Debian architecture
    triplet: str           # multiarch triplet: /usr/lib/<triplet>, .cpython-311-<triplet>.so
    wheel_machine: str     # the machine part of manylinux wheel tags
    qemu: str              # qemu-<qemu>-static runs it on another architecture
    cross_gcc: str         # Debian's cross compiler package builds C extensions for it
    elf_machine: int       # e_machine of its ELF files (a cross-built extension must match)

    @property
    def name(self) -> str:
        """``linux/arm/v7`` style, as `--platform` takes it."""
        return "/".join(p for p in ("linux", self.oci_arch, self.variant) if p)

    @property
    def slug(self) -> str:
        """A file-name-safe name: ``linux-arm-v7``."""
        return self.name.replace("/", "-")

    @property
    def cc(self) -> str:
        """The C compiler command for it: ``<triplet>-gcc`` (Debian's cross compiler, or the
        native gcc's triplet-prefixed name on that architecture itself)."""
        return f"{self.triplet}-gcc"

    def oci(self) -> dict[str, str]:
        """The ``platform`` object of an index entry and the image config's fields."""
        out = {"architecture": self.oci_arch, "os": "linux"}
        if self.variant:
            out["variant"] = self.variant
        return out


PLATFORMS: dict[str, Platform] = {p.name: p for p in (
    Platform("amd64", "", "amd64", "x86_64-linux-gnu", "x86_64", "x86_64",
             "gcc-x86-64-linux-gnu", 62),
    Platform("arm64", "", "arm64", "aarch64-linux-gnu", "aarch64", "aarch64",
             "gcc-aarch64-linux-gnu", 183),
    Platform("arm", "v7", "armhf", "arm-linux-gnueabihf", "armv7l", "arm",
             "gcc-arm-linux-gnueabihf", 40),
    Platform("ppc64le", "", "ppc64el", "powerpc64le-linux-gnu", "ppc64le", "ppc64le",
             "gcc-powerpc64le-linux-gnu", 21),
    Platform("s390x", "", "s390x", "s390x-linux-gnu", "s390x", "s390x",
             "gcc-s390x-linux-gnu", 22),
)}

_MACHINES = {"x86_64": "linux/amd64", "aarch64": "linux/arm64", "armv7l": "linux/arm/v7",
             "ppc64le": "linux/ppc64le", "s390x": "linux/s390x"}


def native() -> Platform:
    """The build machine's own platform: its interpreter compiles every platform's
    bytecode (bytecode does not depend on the architecture)."""
    machine = _platform.machine()
    if machine not in _MACHINES:
        raise SystemExit(f"ocibuild: unsupported build machine {machine!r}; build on one of "
                         f"{sorted(_MACHINES)}")
    return PLATFORMS[_MACHINES[machine]]


def parse(spec: str) -> list[Platform]:
    """``linux/amd64,linux/arm64`` -> platforms, in the table's order; ``all`` for all."""
    if spec.strip() == "all":
        return list(PLATFORMS.values())
    wanted = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [w for w in wanted if w not in PLATFORMS]
    if unknown:
        raise SystemExit(f"ocibuild: unknown platform(s) {unknown}; known: {list(PLATFORMS)}")
    return [p for name, p in PLATFORMS.items() if name in wanted]
