#!/bin/sh
# Install the Debian packages sluice needs to build, test and demo, when any is missing.
# Idempotent and quiet when everything is present; needs root only when something is missing.
set -e
PKGS="clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev libyaml-dev libcmocka-dev
      libmicrohttpd-dev iproute2 ethtool curl tmux procps python3 python3-yaml util-linux prometheus"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
if [ -z "$missing" ]; then
	[ "$1" = "--quiet" ] || echo "install-deps: all packages present"
	exit 0
fi
echo "install-deps: installing:$missing"
if [ "$(id -u)" != 0 ]; then
	echo "install-deps: need root to install packages" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends $missing >/dev/null ||
	{ apt-get update >/dev/null && apt-get install -y --no-install-recommends $missing; }
