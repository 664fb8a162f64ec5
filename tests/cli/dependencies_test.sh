#!/usr/bin/env bash
# Every Debian package the build names (cmake/dependencies.cmake) is one that scripts/bootstrap.sh
# installs: a package added to the build but not to bootstrap would pass CI on a machine that has it
# from earlier work and fail on a fresh one. (scripts/fresh-machine-check.sh is the full proof.)
set -euo pipefail
root="$1"
mapfile -t build_packages < <(grep -oE '^ *ingot_(require(_program)?|missing)\([^)]*' "$root/cmake/dependencies.cmake" |
  grep -v '\$' | grep -oE '"[^"]+"|[a-z0-9][a-z0-9.+-]*-dev|build-essential|[a-z0-9-]+-compiler' | tr -d '"' |
  tr ' ' '\n' | sort -u)
[[ ${#build_packages[@]} -ge 10 ]] || { echo "found only ${#build_packages[@]} packages in cmake/dependencies.cmake: the parser is stale"; exit 1; }
bootstrap_list="$(sed -n '/^PACKAGES=(/,/^)/p' "$root/scripts/bootstrap.sh" | sed 's/#.*//')"
missing=0
for p in "${build_packages[@]}"; do
  if ! grep -qwE -- "$p" <<<"$bootstrap_list"; then
    echo "cmake/dependencies.cmake names the Debian package '$p', which scripts/bootstrap.sh does not install"
    missing=1
  fi
done
[[ $missing -eq 0 ]] && echo "all ${#build_packages[@]} packages of cmake/dependencies.cmake are in scripts/bootstrap.sh"
exit $missing
