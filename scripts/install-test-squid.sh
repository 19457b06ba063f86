#!/usr/bin/env bash
# Installs Debian 13's Squid beside the system's, for the ICAP tests (./setup.sh --test calls it).
#
# Why: Debian 12's Squid 5.7 has Squid's bug 5352: in RESPMOD, once its 64 KiB buffer toward the
# ICAP service is full, it stops reading from the origin until the service answers, so a service
# that answers only after its verdict never gets a body over 64 KiB (docs/ICAP.md, "Known
# limits"). Debian 13's Squid does not stall. Its binary needs a newer C and C++ library than
# Debian 12 has, so it is unpacked (not installed) with Debian 13's libc6, libstdc++6 and
# libgcc-s1 into one folder, and started through that libc's own loader; every other library
# comes from the system. Nothing of the system is changed.
#
# Every file is checked: the suite's InRelease against Debian's archive keyring, the package
# index against InRelease, each package against the index.
set -euo pipefail

suite=trixie
mirror=${ASSAY_DEBIAN_MIRROR:-http://deb.debian.org/debian}
target=${1:-/usr/local/lib/squid-debian13}
packages=(squid libc6 libstdc++6 libgcc-s1)

say() { printf '\033[1m[squid]\033[0m %s\n' "$*"; }

if [ -x "$target/squid" ] && "$target/squid" -v >/dev/null 2>&1; then
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

say "Fetching Debian 13's Squid for the ICAP tests into $target..."
curl -fsS --retry 3 -o InRelease "$mirror/dists/$suite/InRelease"
gpgv --keyring /usr/share/keyrings/debian-archive-keyring.gpg --output Release InRelease 2>/dev/null
index=main/binary-amd64/Packages.xz
expected=$(awk -v f="$index" '/^SHA256:/ { s = 1; next } /^[^ ]/ { s = 0 } s && $3 == f { print $1 }' Release)
[ -n "$expected" ] || { say "$index is not in $suite's Release"; exit 1; }
curl -fsS --retry 3 -o Packages.xz "$mirror/dists/$suite/$index"
echo "$expected  Packages.xz" | sha256sum -c --quiet
xz -d Packages.xz

mkdir -p root
for package in "${packages[@]}"; do
  read -r file sum < <(awk -v p="$package" '
    $0 == "Package: " p { found = 1 }
    found && /^Filename:/ { file = $2 }
    found && /^SHA256:/ { sum = $2 }
    found && /^$/ { print file, sum; exit }' Packages) || true
  [ -n "${file:-}" ] && [ -n "${sum:-}" ] || { say "$package is not in $suite's index"; exit 1; }
  curl -fsS --retry 3 -o package.deb "$mirror/$file"
  echo "$sum  package.deb" | sha256sum -c --quiet
  dpkg-deb -x package.deb root
  rm package.deb
done

binary=$(find root/usr/sbin -maxdepth 1 -name 'squid*' -type f | head -n 1)
[ -n "$binary" ] || { say "no squid binary in the package"; exit 1; }
mkdir -p "$target"
rm -rf "$target/root"
mv root "$target/root"
cat >"$target/squid" <<EOF
#!/bin/sh
# Debian 13's Squid through Debian 13's loader and C/C++ libraries (scripts/install-test-squid.sh).
libs=$target/root/usr/lib/x86_64-linux-gnu
exec "\$libs/ld-linux-x86-64.so.2" --library-path "\$libs:/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu" "$target/$binary" "\$@"
EOF
chmod 755 "$target/squid"
say "$("$target/squid" -v | head -n 1) in $target"
