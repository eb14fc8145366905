#!/bin/sh
# debsrc.sh PKG DEST - unpacks Debian's source package PKG into DEST, at the
# version of the installed binary package built from it when the archive still
# has it, for the self-contained engine build (static/engine.mk). Uses apt-get
# with a private source list (deb-src twins of the system's own entries) and
# private package lists under DEST's parent, so the system's apt configuration
# is left as it is.
set -eu
pkg=$1
dest=$2
bin=${3:-}
mkdir -p "$(dirname "$dest")"
work=$(cd "$(dirname "$dest")" && pwd)/apt
dest=$(cd "$(dirname "$dest")" && pwd)/$(basename "$dest")
mkdir -p "$work/lists/partial" "$work/get"
src=/etc/apt/sources.list.d/debian.sources
if [ -f "$src" ]; then
	sed 's/^Types:.*/Types: deb-src/' "$src" >"$work/src.sources"
	: >"$work/src.list"
else
	sed -n 's/^deb /deb-src /p' /etc/apt/sources.list >"$work/src.list"
	: >"$work/src.sources"
fi
mkdir -p "$work/parts"
cp "$work/src.sources" "$work/parts/src.sources"
O="-o Dir::Etc::sourcelist=$work/src.list -o Dir::Etc::sourceparts=$work/parts -o Dir::State::Lists=$work/lists -o APT::Sandbox::User=root"
[ -n "$(ls "$work/lists" 2>/dev/null | grep Sources)" ] || apt-get $O -qq update >&2
ver=""
[ -n "$bin" ] && ver=$(dpkg-query -W -f='${source:Version}' "$bin" 2>/dev/null || true)
cd "$work/get"
if [ -z "$ver" ] || ! apt-get $O -qq source --download-only "$pkg=$ver" >&2; then
	echo "debsrc: $pkg ${ver:-(any)}: taking the archive's current source" >&2
	apt-get $O -qq source --download-only "$pkg" >&2
fi
rm -rf "$dest"
dsc=$(ls -t "$pkg"_*.dsc | head -n 1)
dpkg-source -q -x "$dsc" "$dest" >&2
echo "debsrc: $pkg from $dsc into $dest" >&2
