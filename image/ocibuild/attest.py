"""The attestations of the index (``make sign``) and their checks (``make verify``).

- ``provenance``: an SLSA v1 provenance predicate (https://slsa.dev/provenance/v1) for
  the index or one platform, from what the build wrote beside the layout: the builder,
  the source commit, the build command, and every input's digest (the Debian packages and
  wheels it consumed, as image/lock.json pins them). cosign wraps it in an in-toto
  statement whose subject is the digest it signs.
- ``check``: an attestation that ``cosign verify-attestation`` printed (and so verified)
  against the image it is attached to: the subject is that digest; an SBOM names exactly
  the Debian packages and the Python distributions that the image's file system holds
  (read from the image as the registry serves it, with ``crane export``); a provenance
  names the commit the image's labels name.
"""

from __future__ import annotations

import base64
import email.parser
import io
import json
import re
import tarfile
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from ocibuild.debian import parse_control

BUILD_TYPE = "https://github.com/cpa-py/cluster-proportional-autoscaler-py/image/ocibuild@v1"
SLSA = "https://slsa.dev/provenance/v1"
SPDX = "https://spdx.dev/Document"


def _dependency(kind: str, name: str, value: Any, arch: str) -> list[dict[str, Any]]:
    """resolvedDependencies entries of one input as inputs.json records it."""
    if kind == "debian":
        version, _, digest = str(value).partition(" sha256:")
        return [{"uri": f"pkg:deb/debian/{name}@{version.replace(':', '%3A')}?arch={arch}",
                 "digest": {"sha256": digest}}]
    if isinstance(value, str):   # "<wheel file> sha256:<hex>" from the package index
        wheel, _, digest = value.partition(" sha256:")
        return [{"uri": f"pkg:pypi/{name.split('==')[0].lower()}@{name.split('==')[1]}",
                 "name": wheel, "digest": {"sha256": digest}}]
    out = [{"uri": f"pkg:pypi/{name.split('==')[0].lower()}@{name.split('==')[1]}",
            "name": "sdist (cross-built: " + str(value["compiler"]) + ")",
            "digest": {"sha256": str(value["cross-built from the sdist"]).split(":", 1)[1]}}]
    for wheel, digest in sorted(value["build tools"].items()):
        out.append({"uri": f"pkg:pypi/{wheel.split('-')[0].lower()}", "name": wheel,
                    "digest": {"sha256": digest.split(":", 1)[1]}})
    for pkg, version_digest in sorted(value["sysroot"].items()):
        version, _, digest = version_digest.partition(" sha256:")
        out.append({"uri": f"pkg:deb/debian/{pkg}@{version.replace(':', '%3A')}?arch={arch}",
                    "name": "sysroot", "digest": {"sha256": digest}})
    return out


def provenance(out: Path, platform: str | None, *, builder_id: str, repository: str,
               command: str) -> dict[str, Any]:
    """The SLSA v1 predicate of the index (``platform`` None: every platform's inputs) or
    of one platform's image, from the build in ``out``."""
    built = json.loads((out / "digests.json").read_text())
    inputs = json.loads((out / "inputs.json").read_text())["platforms"]
    names = [platform] if platform else list(built["platforms"])
    deps: list[dict[str, Any]] = []
    commit = built["revision"].removesuffix("-dirty")
    if re.fullmatch(r"[0-9a-f]{40}", commit):
        deps.append({"uri": f"git+{repository}@{built['revision']}",
                     "digest": {"gitCommit": commit}})
    seen: set[str] = set()
    for name in names:
        arch = {"linux/arm/v7": "armhf", "linux/ppc64le": "ppc64el"}.get(
            name, name.split("/")[1])
        for kind in ("debian", "wheels"):
            for dep_name, value in sorted(inputs[name][kind].items()):
                for dep in _dependency(kind, dep_name, value, arch):
                    key = json.dumps(dep, sort_keys=True)
                    if key not in seen:
                        seen.add(key)
                        deps.append(dep)
    return {
        "buildDefinition": {
            "buildType": BUILD_TYPE,
            "externalParameters": {
                "source": {"uri": f"git+{repository}", "digest": {"gitCommit": commit}},
                "command": command,
                "platforms": names,
                "name": built["name"], "version": built["version"], "tag": built["tag"],
            },
            "internalParameters": {"SOURCE_DATE_EPOCH": built["epoch"],
                                   "compression": built["compression"],
                                   "revision": built["revision"]},
            "resolvedDependencies": deps,
        },
        "runDetails": {
            "builder": {"id": builder_id},
            "metadata": {"invocationId": f"{built['name']}@{built['index']}"},
        },
    }


def statement(line: str) -> dict[str, Any]:
    """The in-toto statement in one line that ``cosign verify-attestation`` prints."""
    envelope = json.loads(line)
    doc: dict[str, Any] = json.loads(base64.b64decode(envelope["payload"]))
    return doc


def image_packages(export: IO[bytes]) -> dict[str, dict[str, str]]:
    """The Debian packages (``/var/lib/dpkg/status.d``) and Python distributions (the
    venv's ``*.dist-info/METADATA``) in an image's flattened file system (a tar stream:
    ``crane export``), name -> version."""
    found: dict[str, dict[str, str]] = {"debian": {}, "python": {}}
    with tarfile.open(fileobj=export, mode="r|") as tar:
        for member in tar:
            name = member.name.lstrip("./")
            if not member.isfile():
                continue
            if name.startswith("var/lib/dpkg/status.d/"):
                fields = parse_control(_read(tar, member))
                found["debian"][fields["Package"]] = fields["Version"]
            elif re.fullmatch(r"opt/venv/lib/python3\.\d+/site-packages/[^/]+\.dist-info/"
                              r"METADATA", name):
                msg = email.parser.Parser().parsestr(_read(tar, member), headersonly=True)
                found["python"][str(msg["Name"])] = str(msg["Version"])
    return found


def _read(tar: tarfile.TarFile, member: tarfile.TarInfo) -> str:
    f = tar.extractfile(member)
    assert f is not None
    return f.read().decode()


def sbom_packages(doc: dict[str, Any]) -> dict[str, dict[str, str]]:
    """What an SPDX document of ocibuild's (sbom.py) names, as image_packages says it."""
    found: dict[str, dict[str, str]] = {"debian": {}, "python": {}}
    for pkg in doc["packages"]:
        if pkg["SPDXID"].startswith("SPDXRef-deb-"):
            found["debian"][pkg["name"]] = pkg["versionInfo"]
        elif pkg["SPDXID"].startswith("SPDXRef-pypi-"):
            found["python"][pkg["name"]] = pkg["versionInfo"]
    return found


def _differences(sbom: dict[str, dict[str, str]], image: dict[str, dict[str, str]]
                 ) -> list[str]:
    out = []
    for kind in ("debian", "python"):
        a, b = sbom[kind], image[kind]
        out += [f"{kind} {n} {a[n]}: in the SBOM, not in the image" for n in sorted(a)
                if n not in b]
        out += [f"{kind} {n} {b[n]}: in the image, not in the SBOM" for n in sorted(b)
                if n not in a]
        out += [f"{kind} {n}: {a[n]} in the SBOM, {b[n]} in the image" for n in sorted(a)
                if n in b and a[n] != b[n]]
    return out


def check(lines: Iterable[str], *, digest: str, kind: str,
          images: dict[str, dict[str, dict[str, str]]], revision: str) -> list[str]:
    """Problems with the verified attestations ``lines`` of ``digest`` (none: []).
    ``images``: platform -> image_packages of the images the digest stands for (one, or
    every platform of an index); ``kind``: spdxjson or slsaprovenance1."""
    problems = []
    statements = [statement(line) for line in lines if line.strip()]
    if not statements:
        return [f"no {kind} attestation of {digest}"]
    covered = set()
    for st in statements:
        subjects = {s["digest"].get("sha256") for s in st.get("subject", [])}
        if digest.removeprefix("sha256:") not in subjects:
            problems.append(f"an attestation's subject is {subjects}, not {digest}")
        if kind == "spdxjson":
            if st.get("predicateType") != SPDX:
                problems.append(f"predicate type {st.get('predicateType')}, not {SPDX}")
                continue
            doc = st["predicate"]
            platform = doc["name"].rsplit(" ", 1)[-1]
            covered.add(platform)
            if platform not in images:
                problems.append(f"an SBOM of {platform}, which {digest} does not hold")
                continue
            problems += [f"{platform}: {d}" for d in
                         _differences(sbom_packages(doc), images[platform])]
        else:
            if st.get("predicateType") != SLSA:
                problems.append(f"predicate type {st.get('predicateType')}, not {SLSA}")
                continue
            source = st["predicate"]["buildDefinition"]["externalParameters"]["source"]
            if source["digest"]["gitCommit"] != revision.removesuffix("-dirty"):
                problems.append(f"provenance of commit {source['digest']['gitCommit']}, the "
                                f"image's label says {revision}")
            covered.update(images)
    missing = sorted(set(images) - covered)
    if missing:
        problems.append(f"no {kind} attestation for {', '.join(missing)}")
    return problems


def export_packages(data: bytes) -> dict[str, dict[str, str]]:
    return image_packages(io.BytesIO(data))


# ------------------------------------------------------------------ make sign / verify
class CosignError(SystemExit):
    """A cosign (or crane) command failed; its own error text is the message."""


def run(argv: list[str], *, env: dict[str, str] | None = None) -> str:
    import os
    import subprocess
    proc = subprocess.run(argv, capture_output=True, text=True, check=False,
                          env={**os.environ, **(env or {})}, timeout=600)
    if proc.returncode != 0:
        tool = Path(argv[0]).name
        raise CosignError(f"[{tool}] {' '.join(argv[1:4])} ... failed (exit "
                          f"{proc.returncode}):\n{proc.stderr.strip()}")
    return proc.stdout


def split_ref(ref: str) -> tuple[str, str]:
    """``registry/name@sha256:...`` or ``registry/name:tag`` -> (repository, tag/digest)."""
    if "@" in ref:
        repo, _, digest = ref.partition("@")
        return repo, digest
    slash = ref.rfind("/")
    colon = ref.rfind(":")
    if colon > slash:
        return ref[:colon], ref[colon + 1:]
    return ref, "latest"


def platforms_of(crane: str, repo: str, digest: str) -> dict[str, str]:
    """platform -> manifest digest of an index in a registry."""
    index = json.loads(run([crane, "manifest", f"{repo}@{digest}"]))
    return {"/".join(x for x in (m["platform"]["os"], m["platform"]["architecture"],
                                 m["platform"].get("variant", "")) if x): m["digest"]
            for m in index["manifests"]}


def key_args(key: str | None, *, verify: bool, identity: str, issuer: str) -> list[str]:
    if key:
        return ["--key", key, "--insecure-ignore-tlog=true"] if verify else [
            "--key", key, "--tlog-upload=false"]
    if verify:   # keyless: the release workflow's identity (docs/container-image.md)
        return ["--certificate-identity-regexp", identity,
                "--certificate-oidc-issuer", issuer]
    return []


def sign(*, cosign: str, crane: str, ref: str, key: str | None, out: Path,
         builder_id: str, repository: str) -> None:
    """Sign the index and every platform's manifest; attach the SBOM and the provenance
    to each platform's manifest, and every SBOM plus the index's provenance to the index."""
    repo, _ = split_ref(ref)
    index = run([crane, "digest", ref]).strip()
    built = json.loads((out / "digests.json").read_text())
    if index != built["index"]:
        raise SystemExit(f"[sign] {ref} is {index}, not the index this checkout built "
                         f"({built['index']} in {out}): sign what `make image` built "
                         "(`make push` it first)")
    platforms = platforms_of(crane, repo, index)
    args = key_args(key, verify=False, identity="", issuer="")
    run([cosign, "sign", "--yes", "--recursive", *args, f"{repo}@{index}"])
    print(f"[sign] signed {repo}@{index} and its {len(platforms)} platform manifests")
    work = out / "attestations"
    work.mkdir(exist_ok=True)
    from ocibuild.platforms import parse
    for name, pdigest in [*platforms.items(), ("index", index)]:
        prov = provenance(out, None if name == "index" else name, builder_id=builder_id,
                          repository=repository, command="make image")
        slug = name.replace("/", "-")
        (work / f"{slug}.slsa.json").write_text(json.dumps(prov, indent=1) + "\n")
        sboms = [out / "sbom" / f"{parse(p)[0].slug}.spdx.json" for p in
                 (platforms if name == "index" else [name])]
        for sbom_file in sboms:
            run([cosign, "attest", "--yes", *args, "--type", "spdxjson", "--predicate",
                 str(sbom_file), f"{repo}@{pdigest}"])
        run([cosign, "attest", "--yes", *args, "--type", "slsaprovenance1", "--predicate",
             str(work / f"{slug}.slsa.json"), f"{repo}@{pdigest}"])
        print(f"[sign] attested {name} {pdigest}: {len(sboms)} SPDX SBOM(s), SLSA v1 "
              "provenance")


def verify(*, cosign: str, crane: str, ref: str, key: str | None, identity: str,
           issuer: str) -> None:
    """cosign verify and verify-attestation (spdxjson, slsaprovenance1) of the index and
    of every platform's manifest, then the attestations' content against the image."""
    repo, _ = split_ref(ref)
    index = run([crane, "digest", ref]).strip()
    platforms = platforms_of(crane, repo, index)
    args = key_args(key, verify=True, identity=identity, issuer=issuer)
    annotations = json.loads(run([crane, "manifest", f"{repo}@{index}"])).get(
        "annotations", {})
    revision = annotations.get("org.opencontainers.image.revision", "")
    images = {name: export_packages(run_bytes([crane, "export", f"{repo}@{d}", "-"]))
              for name, d in platforms.items()}
    problems = []
    for name, digest in [("index", index), *platforms.items()]:
        target = f"{repo}@{digest}"
        run([cosign, "verify", *args, target])
        held = images if name == "index" else {name: images[name]}
        for kind in ("spdxjson", "slsaprovenance1"):
            lines = run([cosign, "verify-attestation", *args, "--type", kind, target])
            problems += [f"{name}: {p}" for p in check(
                lines.splitlines(), digest=digest, kind=kind, images=held, revision=revision)]
        print(f"[verify] {name} {digest}: signature and attestations verified by cosign")
    if problems:
        raise SystemExit("[verify] the attestations do not describe the image:\n  "
                         + "\n  ".join(problems))
    counts = {n: f"{len(p['debian'])} Debian packages, {len(p['python'])} Python "
                 "distributions" for n, p in images.items()}
    print(f"[verify] {repo}@{index}: every SBOM names exactly what its image holds "
          f"({counts[next(iter(counts))]} on {next(iter(counts))}); provenance of {revision}")


def run_bytes(argv: list[str]) -> bytes:
    import subprocess
    proc = subprocess.run(argv, capture_output=True, check=False, timeout=600)
    if proc.returncode != 0:
        raise CosignError(f"[{Path(argv[0]).name}] {' '.join(argv[1:3])} failed:\n"
                          f"{proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout
