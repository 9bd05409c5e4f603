#!/usr/bin/env bash
# `make sign IMAGE=registry/name@sha256:... [KEY=cosign.key]` and
# `make verify IMAGE=... [KEY=cosign.pub]` (docs/container-image.md, "Signed and attested").
#
# sign:   cosign signs the index and every platform's manifest (`--recursive`), and
#         attests on the same digests the SPDX SBOM of each platform and an SLSA v1
#         provenance of the build (image/ocibuild/attest.py). With KEY: no transparency
#         log (`--tlog-upload=false`; COSIGN_PASSWORD is the key's password). Without:
#         keyless, with the OIDC identity of the release workflow (Fulcio, Rekor).
#         It signs only the index this checkout built (.cache/image/out).
# verify: cosign verify, verify-attestation --type spdxjson and --type slsaprovenance1 of
#         the index and of every platform's manifest; then each SBOM must name exactly
#         the Debian packages and Python distributions of its image (read back from the
#         registry) and the provenance the commit of the image's labels. With KEY (a
#         public key): no transparency log; without: CERT_IDENTITY (a regexp) and
#         CERT_ISSUER say whose keyless signature to accept.
# cosign and crane are built from their Go modules once (scripts/pinned-tool.sh, image/tools.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
action="${1:?usage: sign.sh sign|verify IMAGE [KEY]}"
image="${2:?usage: sign.sh sign|verify IMAGE [KEY]}"
key="${3:-}"
cosign="$(bash "$repo/scripts/pinned-tool.sh" cosign)"
crane="$(bash "$repo/image/tools.sh")/crane"
name="$(cat "$repo/image/name.txt")"
case "$action" in
    sign)
        revision="$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)"
        exec env PYTHONPATH="$here" python3 -m ocibuild sign --image "$image" --key "$key" \
            --cosign "$cosign" --crane "$crane" \
            --out "${CPA_IMAGE_OUT:-$repo/.cache/image/out}" \
            --builder-id "${CPA_BUILDER_ID:-https://$name/make-image@$revision}" \
            --repository "${CPA_SOURCE_REPOSITORY:-https://github.com/${name#ghcr.io/}}"
        ;;
    verify)
        exec env PYTHONPATH="$here" python3 -m ocibuild verify --image "$image" --key "$key" \
            --cosign "$cosign" --crane "$crane" \
            --identity "${CERT_IDENTITY:-^https://github.com/${name#ghcr.io/}/.github/workflows/release.yaml@refs/tags/v}" \
            --issuer "${CERT_ISSUER:-https://token.actions.githubusercontent.com}"
        ;;
    *) echo "sign.sh: sign or verify, not $action" >&2; exit 2 ;;
esac
