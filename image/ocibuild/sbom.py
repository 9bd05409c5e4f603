"""An SPDX 2.3 JSON SBOM per platform, and /LICENSES, from what the image holds.

Why our own code and not syft: everything an SBOM of this image must list is known
exactly at build time: the Debian packages whose files were copied (their control fields)
and the Python distributions unpacked into the venv (their dist-info). Reading them here
takes milliseconds, needs no Go build (syft's module graph is one of the largest there is:
minutes cold in CI) and is deterministic (no tool version or scan time in the output).
The image also carries /var/lib/dpkg/status.d, so syft, trivy or grype find the same
Debian packages when a user scans the image.
"""

from __future__ import annotations

import email.parser
import hashlib
import re
import shutil
from pathlib import Path
from typing import Any

from ocibuild.debian import DebPackage, licenses
from ocibuild.platforms import Platform
from ocibuild.python import SITE

# DEP-5 short names -> SPDX identifiers (those that occur in what the image ships).
DEP5_TO_SPDX = {
    "GPL-2": "GPL-2.0-only", "GPL-2+": "GPL-2.0-or-later", "GPL-3": "GPL-3.0-only",
    "GPL-3+": "GPL-3.0-or-later", "LGPL-2": "LGPL-2.0-only", "LGPL-2+": "LGPL-2.0-or-later",
    "LGPL-2.1": "LGPL-2.1-only", "LGPL-2.1+": "LGPL-2.1-or-later", "LGPL-3": "LGPL-3.0-only",
    "LGPL-3+": "LGPL-3.0-or-later", "BSD-2-clause": "BSD-2-Clause",
    "BSD-3-clause": "BSD-3-Clause", "BSD-4-clause": "BSD-4-Clause", "MIT": "MIT",
    "Expat": "MIT", "ISC": "ISC", "Zlib": "Zlib", "zlib": "Zlib", "Apache-2.0": "Apache-2.0",
    "public-domain": "LicenseRef-public-domain", "PD": "LicenseRef-public-domain",
    "bzip2-1.0.6": "bzip2-1.0.6", "BSD-3-Clause": "BSD-3-Clause", "X11": "X11",
    "GPL-2+ with Autoconf exception": "GPL-2.0-or-later WITH Autoconf-exception-2.0",
    "GPL-3+ with Autoconf exception": "GPL-3.0-or-later WITH Autoconf-exception-3.0",
    "0BSD": "0BSD", "permissive": "LicenseRef-permissive", "MPL-1.1": "MPL-1.1",
    "Artistic": "Artistic-1.0-Perl", "GPL-1+": "GPL-1.0-or-later", "GPL-1": "GPL-1.0-only",
}
# Copyright files that are not machine-readable, by Debian source package.
SOURCE_LICENSES = {
    "glibc": "LGPL-2.1-or-later AND GPL-2.0-or-later",
    "gcc-12": "GPL-3.0-or-later WITH GCC-exception-3.1",
    "python3.11": "PSF-2.0",
    "libxcrypt": "LGPL-2.1-or-later",
    "krb5": "MIT",
    "libselinux": "LicenseRef-public-domain",
}
CLASSIFIERS = {"MIT License": "MIT", "Apache Software License": "Apache-2.0",
               "BSD License": "LicenseRef-BSD", "Python Software Foundation License": "PSF-2.0"}


def _spdx_id(kind: str, name: str) -> str:
    return "SPDXRef-" + kind + "-" + re.sub(r"[^A-Za-z0-9.-]", "-", name)


def debian_license(pkg: DebPackage, copyright_text: str) -> str:
    names = licenses(copyright_text)
    if not names:
        return SOURCE_LICENSES.get(pkg.source, "NOASSERTION")
    parts = []
    for name in names:
        choices = [_spdx_license(n) for n in re.split(r"\s+or\s+", name.rstrip(","))]
        spdx = " OR ".join(dict.fromkeys(choices))
        if spdx not in parts:
            parts.append(spdx)
    return " AND ".join(f"({p})" if " " in p else p for p in parts)


def _spdx_license(name: str) -> str:
    name = name.strip(" ,")
    return DEP5_TO_SPDX.get(name) or ("LicenseRef-" + re.sub(r"[^A-Za-z0-9.-]", "-", name))


def dist_infos(*roots: Path) -> list[Path]:
    """The dist-info directories of the venvs under ``roots`` (an image's layers), by name."""
    return sorted((d for root in roots for d in (root / SITE.lstrip("/")).glob("*.dist-info")),
                  key=lambda d: d.name)


def dist_metadata(dist_info: Path) -> dict[str, Any]:
    msg = email.parser.Parser().parsestr((dist_info / "METADATA").read_text())
    lic = msg.get("License-Expression")
    if not lic:
        lic = msg.get("License") if len(msg.get("License") or "") < 40 else None
    if not lic:
        found = [CLASSIFIERS[c.split("::")[-1].strip()] for c in msg.get_all("Classifier", [])
                 if c.startswith("License ::") and c.split("::")[-1].strip() in CLASSIFIERS]
        lic = " AND ".join(found) if found else "NOASSERTION"
    return {"name": msg["Name"], "version": msg["Version"], "license": lic}


def license_files(dist_info: Path) -> list[Path]:
    lic_dir = dist_info / "licenses"
    if lic_dir.is_dir():
        return sorted(p for p in lic_dir.rglob("*") if p.is_file())
    return sorted(p for p in dist_info.iterdir()
                  if re.match(r"(LICEN[CS]E|COPYING|NOTICE|AUTHORS)", p.name))


def write_licenses(root: Path, tree: Path, shipped: list[DebPackage]) -> None:
    """/LICENSES/debian/<package>/copyright and /LICENSES/python/<dist>/<files> (for the
    distributions installed under ``root``)."""
    base = root / "LICENSES"
    for pkg in shipped:
        src = tree / pkg.copyright.lstrip("/")
        if not src.exists():
            raise SystemExit(f"ocibuild: {pkg.name} ships without {pkg.copyright}")
        dst = base / "debian" / pkg.name / "copyright"
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
    write_python_licenses(root)
    (base / "README").write_text(
        "Licence texts of everything in this image: debian/<package>/copyright for each\n"
        "Debian package whose files it holds, python/<distribution>/ for each Python\n"
        "distribution in /opt/venv (the autoscaler itself among them). The SPDX SBOM of\n"
        "this image is sbom.spdx.json here.\n")


def write_python_licenses(root: Path) -> None:
    """/LICENSES/python/<dist>/<files> for the distributions installed under ``root``."""
    base = root / "LICENSES"
    for dist_info in dist_infos(root):
        meta = dist_metadata(dist_info)
        files = license_files(dist_info)
        if not files:
            raise SystemExit(f"ocibuild: {dist_info.name} has no licence file")
        for f in files:
            dst = base / "python" / meta["name"] / f.name
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, dst)


def spdx(plat: Platform, roots: list[Path], tree: Path, shipped: list[DebPackage], *,
         image_name: str, version: str, created: str) -> dict[str, Any]:
    """The image's SBOM; ``roots``: the trees of its layers (their venvs' distributions)."""
    packages: list[dict[str, Any]] = []
    image_id = "SPDXRef-Image"
    packages.append({
        "SPDXID": image_id, "name": image_name, "versionInfo": version,
        "primaryPackagePurpose": "CONTAINER", "downloadLocation": "NOASSERTION",
        "filesAnalyzed": False, "licenseConcluded": "NOASSERTION",
        "licenseDeclared": "NOASSERTION", "comment": f"image for {plat.name}",
    })
    python_deb = next(p for p in shipped if p.name.startswith("python3.") and
                      p.name.endswith("-minimal"))
    interp_version = python_deb.version.split("-")[0]
    packages.append({
        "SPDXID": "SPDXRef-Interpreter-cpython", "name": "cpython",
        "versionInfo": interp_version, "primaryPackagePurpose": "APPLICATION",
        "supplier": "Organization: Debian", "downloadLocation": "NOASSERTION",
        "filesAnalyzed": False, "licenseConcluded": "NOASSERTION",
        "licenseDeclared": "PSF-2.0",
        "comment": f"the interpreter: /usr/bin/{python_deb.name.removesuffix('-minimal')} "
                   f"from Debian package {python_deb.name} {python_deb.version}",
        "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                          "referenceLocator": f"pkg:generic/cpython@{interp_version}"}],
    })
    for pkg in shipped:
        text = (tree / pkg.copyright.lstrip("/")).read_text(errors="replace")
        packages.append({
            "SPDXID": _spdx_id("deb", pkg.name), "name": pkg.name, "versionInfo": pkg.version,
            "supplier": "Organization: Debian", "downloadLocation": "NOASSERTION",
            "filesAnalyzed": False, "licenseConcluded": "NOASSERTION",
            "licenseDeclared": debian_license(pkg, text),
            "sourceInfo": f"Debian source package {pkg.source} {pkg.source_version}",
            "comment": f"licence text: /LICENSES/debian/{pkg.name}/copyright",
            "externalRefs": [{
                "referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                "referenceLocator": f"pkg:deb/debian/{pkg.name}@{pkg.version.replace(':', '%3A')}"
                                    f"?arch={pkg.arch}&distro=debian-12"}],
        })
    for dist_info in dist_infos(*roots):
        meta = dist_metadata(dist_info)
        packages.append({
            "SPDXID": _spdx_id("pypi", meta["name"]), "name": meta["name"],
            "versionInfo": meta["version"], "downloadLocation": "NOASSERTION",
            "filesAnalyzed": False, "licenseConcluded": "NOASSERTION",
            "licenseDeclared": meta["license"],
            "comment": f"licence text: /LICENSES/python/{meta['name']}/",
            "externalRefs": [{
                "referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                "referenceLocator": f"pkg:pypi/{meta['name'].lower()}@{meta['version']}"}],
        })
    refs = sorted({lic for p in packages for lic in re.findall(r"LicenseRef-[A-Za-z0-9.-]+",
                                                               p["licenseDeclared"])})
    relationships = [{"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES",
                      "relatedSpdxElement": image_id}]
    relationships += [{"spdxElementId": image_id, "relationshipType": "CONTAINS",
                       "relatedSpdxElement": p["SPDXID"]} for p in packages[1:]]
    body = {"packages": packages, "relationships": relationships}
    digest = hashlib.sha256(repr(body).encode()).hexdigest()[:16]
    return {
        "spdxVersion": "SPDX-2.3", "dataLicense": "CC0-1.0", "SPDXID": "SPDXRef-DOCUMENT",
        "name": f"{image_name}:{version} {plat.name}",
        "documentNamespace": f"https://{image_name}/spdx/{version}/{plat.slug}/{digest}",
        "creationInfo": {"created": created, "creators": ["Tool: ocibuild (image/ocibuild)"]},
        "documentDescribes": [image_id],
        **body,
        "hasExtractedLicensingInfos": [{
            "licenseId": ref, "extractedText": "See the package's copyright file under "
                                               "/LICENSES in the image."} for ref in refs],
    }
