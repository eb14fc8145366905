#!/bin/sh
# deps.sh - installs what fgpack's build, tests and demo need, only what is
# missing (idempotent). Debian packages through apt-get, npm packages into
# tests/node/ (see tests/node/package.json). Used by `make deps`, `make demo`
# and .ci/run.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
DEBS="build-essential pkg-config libcurl4-openssl-dev libssl-dev libarchive-dev libcjson-dev
libzstd-dev libmicrohttpd-dev nginx-light python3 python3-numpy python3-botocore awscli
nodejs npm zstd curl ca-certificates clang strace git libarchive-tools lighttpd"
missing=""
for p in $DEBS; do
	# nodesource's nodejs bundles npm and conflicts with Debian's npm package
	[ "$p" = npm ] && command -v npm >/dev/null 2>&1 && continue
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "deps: installing$missing" >&2
	SUDO=""
	[ "$(id -u)" -eq 0 ] || SUDO=sudo
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >&2
	# the package starts its own service on port 80 where the init system lets
	# it; the tests run lighttpd themselves, on a free port (pull_lighttpd.sh)
	case " $missing " in *" lighttpd "*)
		$SUDO systemctl disable --now lighttpd >/dev/null 2>&1 ||
			$SUDO service lighttpd stop >/dev/null 2>&1 || true ;;
	esac
fi
if [ -f "$top/tests/node/package.json" ]; then
	if [ ! -d "$top/tests/node/node_modules" ] || [ "$top/tests/node/package.json" -nt "$top/tests/node/node_modules" ]; then
		echo "deps: npm install in tests/node" >&2
		(cd "$top/tests/node" && npm install --no-audit --no-fund --loglevel=error >&2 && touch node_modules)
	fi
fi
