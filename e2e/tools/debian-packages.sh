#!/usr/bin/env bash
# The Debian packages the image e2e needs besides the Go-built tools: the Docker engine
# (docker.io: dockerd 20.10 with BuildKit, containerd, runc), the image registry
# (docker-registry: distribution 2.8) and mmdebstrap (the base image stand-ins,
# e2e/harness/base_images.py). Installed from the machine's own apt sources, once; the
# services their packages declare are never started: the harness runs dockerd and the
# registry itself, on 127.0.0.1 and without a bridge (e2e/harness/docker_engine.py).
set -euo pipefail
PACKAGES=(docker.io docker-registry mmdebstrap)
PROGRAMS=(/usr/sbin/dockerd /usr/bin/docker /usr/bin/docker-registry /usr/bin/mmdebstrap)

missing=0
for program in "${PROGRAMS[@]}"; do [[ -x "$program" ]] || missing=1; done
if [[ "$missing" == 0 ]]; then
  echo "e2e-tools: Debian packages present (${PACKAGES[*]})"
  exit 0
fi
[[ "$(id -u)" == 0 ]] || { echo "e2e-tools: installing ${PACKAGES[*]} needs root (apt-get)" >&2; exit 78; }
# A package's maintainer scripts would start its service; policy-rc.d (invoke-rc.d's own switch)
# forbids that for the time of the install when the machine has no such policy already.
policy=/usr/sbin/policy-rc.d
added_policy=0
if [[ ! -e "$policy" ]]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod +x "$policy" && added_policy=1
fi
trap '[[ "$added_policy" == 1 ]] && rm -f "$policy"' EXIT
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null
echo "e2e-tools: installed ${PACKAGES[*]}"
