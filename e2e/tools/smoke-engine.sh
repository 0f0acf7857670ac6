#!/usr/bin/env bash
# Runs the built engine once, with nothing reaching a network: state in a local
# file backend, secrets by passphrase, the language host and the Kubernetes
# provider found on PATH. A program declaring one ConfigMap through a provider
# whose cluster is unreachable (127.0.0.1:1) is previewed; the preview must plan
# the ConfigMap. Exits 78 when a tool is not built, 1 when the preview fails.
#
#   smoke-engine.sh [VENV]    VENV: the program's environment (default: .venv of the clone)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$(cd "${1:-$HERE/../../.venv}" && pwd)"
dirs="$(bash "$HERE/build.sh" --where pulumi pulumi-language-python pulumi-kubernetes)" || exit 78
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

export PATH="$(cut -d' ' -f2 <<<"$dirs" | sed 's|$|/bin|' | paste -sd:):$PATH"
export PULUMI_HOME="$work/home" PULUMI_BACKEND_URL="file://$work/state" PULUMI_CONFIG_PASSPHRASE=smoke
export PULUMI_SKIP_UPDATE_CHECK=true PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true
# The language host built (e2e/README.md, "The engine") ignores runtime.options.
export PULUMI_PYTHON_CMD="$VENV/bin/python"
mkdir -p "$work/state" "$work/prog"

cat > "$work/kubeconfig" <<'YAML'
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
YAML
cat > "$work/prog/Pulumi.yaml" <<YAML
name: smoke
runtime:
  name: python
  options:
    toolchain: pip
    virtualenv: $VENV
YAML
cat > "$work/prog/__main__.py" <<PY
import pulumi
import pulumi_kubernetes as k8s

provider = k8s.Provider("unreachable", kubeconfig=open("$work/kubeconfig").read())
k8s.core.v1.ConfigMap(
    "smoke",
    metadata={"name": "smoke", "namespace": "default"},
    data={"a": "b"},
    opts=pulumi.ResourceOptions(provider=provider),
)
PY

cd "$work/prog"
pulumi version
pulumi stack init smoke --non-interactive >/dev/null
timeout 300 pulumi preview --non-interactive --stack smoke | tee "$work/preview.txt"
grep -q 'kubernetes:core/v1:ConfigMap *smoke *create' "$work/preview.txt" \
  || { echo "smoke-engine: the preview planned no ConfigMap" >&2; exit 1; }
echo "smoke-engine: ok"
