#!/usr/bin/env bash
# Builds the e2e harness's programs from their pinned Go modules into a cache
# outside the clone, one directory per tool keyed by what decides the binary:
# the tool's go.mod, go.sum and recipe, and the Go version. A tool already in
# the cache is not built again; nothing built is committed.
#
#   build.sh [TOOL...]        build what is missing (default: every tool), print each build time
#   build.sh --where [TOOL...] print "TOOL DIR" per tool; exit 1 naming any not built yet
#
# Each tool is a directory beside this script: go.mod (a `tool` directive per
# main package, `require` at the pinned version), go.sum, and a recipe (bash:
# PACKAGES, OUTPUT_NAMES, LDFLAGS, COPY_FROM_MODULE "module@version/path:dest";
# a copy into bin/ is made executable). A recipe may define `prepare WORKDIR`,
# run in the tool's directory before the build, to make files the build needs
# (the module cache is read-only) and set BUILD_FLAGS for `go build` to use
# them (-modfile with a replace of the module by a copy in WORKDIR: go build
# -overlay refuses files in the module cache); WORKDIR is removed after the build.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${GKE_FINETUNE_E2E_TOOLS:-$HOME/.cache/gke-finetune/e2e-tools}"
ALL_TOOLS=(etcd kubernetes kwok jobset kueue helm fake-gcs pulumi pulumi-language-python pulumi-kubernetes
           buildx docker-build)

tool_key() {
  local tool="$1"
  # The tool's own Go sources (helm-render) count too, and so do the modules of its
  # subdirectories (docker-build's stand-ins, replaced into its build); the others have none.
  { cat "$HERE/$tool/go.mod" "$HERE/$tool/go.sum" "$HERE/$tool/recipe"
    find "$HERE/$tool" -maxdepth 1 -name '*.go' | sort | xargs -r cat
    find "$HERE/$tool" -mindepth 2 -type f \( -name '*.go' -o -name go.mod \) | sort | xargs -r cat
    go env GOVERSION GOOS GOARCH; } \
    | sha256sum | cut -c1-16
}

tool_dir() { echo "$CACHE/$1-$(tool_key "$1")"; }

build_tool() {
  local tool="$1" dir tmp start
  dir="$(tool_dir "$tool")"
  if [[ -f "$dir/.complete" ]]; then
    echo "e2e-tools: $tool cached in $dir ($(cat "$dir/.complete"))"
    return
  fi
  tmp="$dir.partial.$$"
  rm -rf "$tmp" && mkdir -p "$tmp/bin"
  # shellcheck disable=SC1091
  local PACKAGES="" OUTPUT_NAMES="" LDFLAGS="" COPY_FROM_MODULE="" BUILD_FLAGS=""
  unset -f prepare
  source "$HERE/$tool/recipe"
  start=$(date +%s)
  (
    cd "$HERE/$tool"
    go mod download
    local -a flags=(-ldflags "$LDFLAGS")
    if declare -F prepare >/dev/null; then
      mkdir -p "$tmp.prepare"
      prepare "$tmp.prepare"
      flags+=($BUILD_FLAGS)
    fi
    if [[ -n "$OUTPUT_NAMES" ]]; then
      # A main package whose directory name isn't the program's name: one -o each.
      local -a pkgs=($PACKAGES) names=($OUTPUT_NAMES)
      for i in "${!pkgs[@]}"; do
        GOFLAGS="${GOFLAGS:-} -trimpath" CGO_ENABLED=0 \
          go build "${flags[@]}" -o "$tmp/bin/${names[$i]}" "${pkgs[$i]}"
      done
    else
      GOFLAGS="${GOFLAGS:-} -trimpath" CGO_ENABLED=0 go build "${flags[@]}" -o "$tmp/bin/" $PACKAGES
    fi
    for pair in $COPY_FROM_MODULE; do
      local src="${pair%%:*}" dest="${pair#*:}"
      # A module version outside the tool's build list is fetched by its own name.
      local version="${src#*@}"; local modver="${src%%@*}@${version%%/*}"
      [[ -e "$(go env GOMODCACHE)/$modver" ]] || go mod download "$modver"
      mkdir -p "$tmp/$(dirname "$dest")"
      cp -r "$(go env GOMODCACHE)/$src" "$tmp/$dest"
      chmod -R u+w "$tmp/$dest"
      [[ "$dest" != bin/* ]] || chmod -R a+x "$tmp/$dest"
    done
  )
  rm -rf "$tmp.prepare"
  local seconds=$(( $(date +%s) - start ))
  echo "built in ${seconds}s on $(nproc) cores, $(date -u +%FT%TZ)" > "$tmp/.complete"
  rm -rf "$dir" && mv "$tmp" "$dir"
  echo "e2e-tools: $tool built in ${seconds}s -> $dir"
}

where() {
  local missing=0 tool dir
  for tool in "$@"; do
    dir="$(tool_dir "$tool")"
    if [[ -f "$dir/.complete" ]]; then
      echo "$tool $dir"
    else
      echo "e2e-tools: $tool is not built (expected in $dir): run make e2e-tools" >&2
      missing=1
    fi
  done
  return $missing
}

main() {
  command -v go >/dev/null || { echo "e2e-tools: the go command is required (Go 1.26)" >&2; exit 78; }
  if [[ "${1:-}" == "--where" ]]; then
    shift
    where "${@:-${ALL_TOOLS[@]}}"
    return
  fi
  local tool
  for tool in "${@:-${ALL_TOOLS[@]}}"; do
    [[ -f "$HERE/$tool/recipe" ]] || { echo "e2e-tools: unknown tool '$tool' (known: ${ALL_TOOLS[*]})" >&2; exit 78; }
    build_tool "$tool"
  done
}

main "$@"
