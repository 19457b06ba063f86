#!/usr/bin/env bash
# Installs everything Assay needs on a Debian or Ubuntu machine: ClamAV from the OS packages (when
# missing and this user may install packages), the npm dependencies, and the build.
# `--test` also installs what only the test suite needs: the OS's Chromium for the browser tests.
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

node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$node_major" -lt 20 ]; then
  say "Node.js 20 or newer is required (found: $(node --version 2>/dev/null || echo none))."
  exit 1
fi

# clamd is the malware engine; clamav-testfiles holds harmless samples the test suite scans.
missing=()
command -v clamd >/dev/null 2>&1 || [ -x /usr/sbin/clamd ] || missing+=(clamav-daemon)
[ -d /usr/share/clamav-testfiles ] || missing+=(clamav-testfiles)
# The browser tests drive a real headless Chromium; `npm start` does not need it.
if [ "$for_tests" = true ]; then
  [ -x /usr/lib/chromium/chromium ] || missing+=(chromium)
fi
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then sudo=""; elif sudo -n true 2>/dev/null; then sudo="sudo -n"; else sudo="none"; fi
  if [ "$sudo" = "none" ] || ! command -v apt-get >/dev/null 2>&1; then
    say "Missing OS packages: ${missing[*]}. Install them (apt-get install ${missing[*]}),"
    say "or point ASSAY_CLAMD at a running clamd. Continuing without them."
  else
    say "Installing ${missing[*]} from the OS packages..."
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
fi

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  say "Installing npm dependencies (better-sqlite3 compiles from source: about a minute)..."
  npm ci --no-audit --no-fund
fi

say "Building..."
npm run --silent build
say "Ready."
