#!/bin/sh
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
# Install the Debian packages sluice needs, when any is missing. Idempotent and quiet when
# everything is present; needs root only when something is missing.
#   tools/install-deps.sh [--quiet] [--build]
# --build: only what building needs (PKGS; the Dockerfile's build stage installs the same);
# default: also what the tests and the demo run (TEST_PKGS).
set -e
PKGS="clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev libyaml-dev libjansson-dev
      libcmocka-dev libmicrohttpd-dev"
TEST_PKGS="iproute2 ethtool curl tmux procps python3 python3-yaml util-linux prometheus systemd
           redis-server mariadb-server-core mariadb-client-core"
quiet=0 want="$PKGS $TEST_PKGS"
for a in "$@"; do
	case "$a" in
	--quiet) quiet=1 ;;
	--build) want="$PKGS" ;;
	*) echo "usage: $0 [--quiet] [--build]" >&2; exit 2 ;;
	esac
done
missing=""
for p in $want; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
if [ -z "$missing" ]; then
	[ "$quiet" = 1 ] || echo "install-deps: all packages present"
	exit 0
fi
echo "install-deps: installing:$missing"
if [ "$(id -u)" != 0 ]; then
	echo "install-deps: need root to install packages" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# Servers the tests use (redis-server, prometheus) run as the tests' own copies in their
# namespaces: their packaged services are not started on install (the policy-rc.d answer
# "not allowed", here only while this script installs, and only where none is in place).
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d &&
		trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get install -y --no-install-recommends $missing >/dev/null ||
	{ apt-get update >/dev/null && apt-get install -y --no-install-recommends $missing; }
