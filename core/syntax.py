"""Syntax rules of the names the platform passes to Kubernetes and Google Cloud.

One home for each regular expression; the stack layer reports a mismatch
with the key, the value and these rules.
"""

from __future__ import annotations

import re

# A DNS-1035 label: JobSet, Job and node pool names (and the pod hostnames JobSet derives).
# https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#rfc-1035-label-names
DNS_1035_LABEL = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
DNS_LABEL_MAX = 63
_DNS_1035 = re.compile(DNS_1035_LABEL)

# An environment variable name as Kubernetes accepts it in a container's env
# (C identifier form; the API also allows '-' and '.', which shells don't).
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# An image pinned by digest: <registry>[:port]/<path>[:tag]@sha256:<64 hex>.
# The optional tag is informative only; the digest is what is pulled.
IMAGE_DIGEST_REF = re.compile(r"^[a-z0-9.\-]+(?::[0-9]+)?/[a-z0-9._/\-]+(?::[\w.\-]+)?@sha256:[0-9a-f]{64}$")

# https://cloud.google.com/resource-manager/docs/creating-managing-projects#before_you_begin
PROJECT_ID = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
REGION = re.compile(r"^[a-z]+-[a-z]+[0-9]+$")
ZONE = re.compile(r"^(?P<region>[a-z]+-[a-z]+[0-9]+)-[a-z]$")
# https://cloud.google.com/compute/docs/instances/reservations-shared#consuming_shared_reservations
RESERVATION = re.compile(
    r"^(projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/reservations/)?[a-z]([-a-z0-9]{0,61}[a-z0-9])?$"
)


def is_dns_label(name: str) -> bool:
    return len(name) <= DNS_LABEL_MAX and bool(_DNS_1035.match(name))
