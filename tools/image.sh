#!/bin/bash
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# Build deploy/Dockerfile into a local image with buildah (no Docker daemon needed), as
# `make image` does:
#   tools/image.sh [BUILD_DIR]
# Environment:
#   IMAGE       the tag to build (default localhost/sluice:dev)
#   BASE_IMAGE  the Debian 12 base both stages start FROM. Default: localhost/debian:12 when
#               it is in the local store; else debian:12 pulled from a registry when one is
#               configured and reachable; else localhost/debian:12 made here with mmdebstrap
#               from this machine's apt sources (about 40 s) and imported with podman.
# Steps run with `--isolation chroot` (no OCI runtime or cgroup setup needed, so the build
# also works where podman cannot run containers). Needs root; installs buildah, mmdebstrap
# and podman with apt-get when missing. Writes IMAGE_ENV (default BUILD_DIR/image/image.env):
# the image, its base, its size in bytes and the build time.
set -euo pipefail
BUILD=${1:-${BUILD:-build}}
IMAGE=${IMAGE:-localhost/sluice:dev}
BASE_IMAGE=${BASE_IMAGE:-}
OUT=$BUILD/image
LOCAL_BASE=localhost/debian:12

say() { echo "image: $*"; }
[ "$(id -u)" = 0 ] || { echo "image: needs root (buildah's chroot isolation, mmdebstrap)" >&2; exit 1; }

missing=""
for p in buildah mmdebstrap podman; do command -v "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
	say "installing:$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y --no-install-recommends $missing >/dev/null ||
		{ apt-get update >/dev/null && apt-get install -y --no-install-recommends $missing; }
fi
mkdir -p "$OUT"

# The base: Debian 12 minbase from the apt sources this machine is configured with. The apt
# options that let this machine use its mirror (a frozen snapshot has expired Release files)
# go into the base too, so the Dockerfile's apt-get runs work the same way.
make_base() {
	local srcs=() opts=() f
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
		[ -s "$f" ] && grep -qv '^[[:space:]]*\(#\|$\)' "$f" && srcs+=("$f")
	done
	for o in Acquire::Check-Valid-Until Acquire::Check-Date; do
		[ "$(apt-config dump | sed -n "s/^$o \"\(.*\)\";$/\1/p")" = false ] &&
			opts+=("--aptopt=$o \"false\"")
	done
	say "making $LOCAL_BASE with mmdebstrap (sources: ${srcs[*]:-the default mirror})"
	rm -f "$OUT/rootfs.tar"
	mmdebstrap --quiet --variant=minbase "${opts[@]}" bookworm "$OUT/rootfs.tar" "${srcs[@]}"
	podman import --quiet "$OUT/rootfs.tar" "$LOCAL_BASE" >/dev/null
	rm -f "$OUT/rootfs.tar"
}

t0=$(date +%s)
if [ -z "$BASE_IMAGE" ]; then
	if buildah inspect --type image "$LOCAL_BASE" >/dev/null 2>&1; then
		BASE_IMAGE=$LOCAL_BASE
	elif timeout 60 buildah pull --quiet debian:12 >/dev/null 2>&1; then
		BASE_IMAGE=debian:12
	else
		say "no registry reachable for debian:12"
		make_base
		BASE_IMAGE=$LOCAL_BASE
	fi
fi
say "building $IMAGE from deploy/Dockerfile on $BASE_IMAGE"
tb=$(date +%s)
buildah bud --isolation chroot --pull=never --layers \
	--ignorefile deploy/Dockerfile.dockerignore -f deploy/Dockerfile \
	--build-arg "DEBIAN_IMAGE=$BASE_IMAGE" -t "$IMAGE" . > "$OUT/build.log" 2>&1 ||
	{ tail -30 "$OUT/build.log" >&2; echo "image: build failed (log: $OUT/build.log)" >&2; exit 1; }
t1=$(date +%s)
size=$(buildah inspect --type image --format '{{.Docker.Size}}' "$IMAGE" 2>/dev/null || echo 0)
[ "$size" -gt 0 ] 2>/dev/null ||
	size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
cat > "${IMAGE_ENV:-$OUT/image.env}" <<EOF
IMAGE=$IMAGE
BASE_IMAGE=$BASE_IMAGE
IMAGE_SIZE_BYTES=$size
BUILD_SECONDS=$((t1 - tb))
TOTAL_SECONDS=$((t1 - t0))
EOF
mb=$((size / 1000000)) build_s=$((t1 - tb)) total_s=$((t1 - t0))
say "$IMAGE: $mb MB, built in $build_s s ($total_s s in all)"
