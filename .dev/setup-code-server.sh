#!/usr/bin/env bash
# Idempotent setup for the end-to-end layer and `npm start`: Debian packages, then code-server 4.100.3
# (VS Code 1.100.3, the last release whose postinstall accepts Node 20) into .tools/code-server.
# code-server lives in its own folder, never in the project's package.json: its postinstall pins the Node
# major version and builds native modules.
# Needs: Debian 12, Node 20, npm registry + apt only. Root for apt (skipped when everything is present).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TOOLS="${GPUMEM_TOOLS_DIR:-$ROOT/.tools}"
CS_VERSION="4.100.3"
# @vscode/ripgrep version pinned by code-server 4.100.3's lib/vscode shrinkwrap, and the asset its
# postinstall would download from GitHub.
RG_PKG_VERSION="1.15.11"
RG_ASSET="ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz"
CS_BIN="$TOOLS/code-server/node_modules/.bin/code-server"
export npm_config_nodedir="${npm_config_nodedir:-/usr}"

timed() { local s=$SECONDS; "$@"; echo "  [$((SECONDS - s))s] $*" >&2; }

# 1. Debian packages: the browser, ripgrep (replaces @vscode/ripgrep's GitHub download), headers for
#    code-server's native modules (kerberos needs gssapi from libkrb5-dev).
APT_PACKAGES=(chromium ripgrep libkrb5-dev pkg-config python3 make g++ curl)
missing=()
for p in "${APT_PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  if [ "$(id -u)" != 0 ]; then
    echo "setup-code-server: missing Debian packages: ${missing[*]} — run as root or: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "setup-code-server: installing ${missing[*]}" >&2
  timed apt-get update -qq
  timed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# 2. code-server from npm with the three offline workarounds.
if [ ! -x "$CS_BIN" ]; then
  mkdir -p "$TOOLS/tmp" "$TOOLS/rgpack" "$TOOLS/code-server"
  # (a) @vscode/ripgrep's postinstall first looks in $TMPDIR/vscode-ripgrep-cache-<ver>/<asset>; seed that
  #     cache with Debian's rg so no GitHub download is attempted.
  mkdir -p "$TOOLS/tmp/vscode-ripgrep-cache-$RG_PKG_VERSION"
  cp "$(command -v rg)" "$TOOLS/rgpack/rg"
  tar czf "$TOOLS/tmp/vscode-ripgrep-cache-$RG_PKG_VERSION/$RG_ASSET" -C "$TOOLS/rgpack" rg
  echo '{"name":"code-server-tools","private":true}' > "$TOOLS/code-server/package.json"
  # (b) code-server's postinstall refuses root unless npm_config_unsafe_perm=true.
  # (c) node-pty's postinstall runs `npx node-gyp`; an .npmrc with yes=false makes npx abort.
  echo "setup-code-server: installing code-server $CS_VERSION into $TOOLS/code-server (about 70 s)" >&2
  if ! ( cd "$TOOLS/code-server" && TMPDIR="$TOOLS/tmp" npm_config_unsafe_perm=true npm_config_yes=true \
         timed npm install --no-audit --no-fund --no-save "code-server@$CS_VERSION" > "$TOOLS/code-server-install.log" 2>&1 ); then
    tail -40 "$TOOLS/code-server-install.log" >&2
    echo "setup-code-server: npm install code-server@$CS_VERSION failed (full log: $TOOLS/code-server-install.log)" >&2
    exit 1
  fi
  test -x "$TOOLS/code-server/node_modules/code-server/lib/vscode/node_modules/@vscode/ripgrep/bin/rg" || {
    echo "setup-code-server: code-server installed without its ripgrep binary; search will not work" >&2; exit 1; }
fi

# --version writes ~/.config/code-server; keep that out of the real HOME.
mkdir -p "$TOOLS/tmp/home"
echo "setup-code-server: ready: $(HOME="$TOOLS/tmp/home" "$CS_BIN" --version 2>/dev/null | tail -1)" >&2
