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
# A Pulumi stack name (alphanumerics, hyphens, underscores, periods; at most 100: pulumi
# sdk/go/common/tokens/stack_name.go ParseStackName)
# that is also one segment of a bucket path: not '.', '..' or hidden.
STACK_SEGMENT = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}")
ZONE = re.compile(r"^(?P<region>[a-z]+-[a-z]+[0-9]+)-[a-z]$")
# https://cloud.google.com/compute/docs/instances/reservations-shared#consuming_shared_reservations
RESERVATION = re.compile(
    r"^(projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/reservations/)?[a-z]([-a-z0-9]{0,61}[a-z0-9])?$"
)


def or_empty(pattern: str) -> str:
    """`pattern`, or the empty string (a key whose empty value means its default)."""
    return f"^$|{pattern}"


def is_dns_label(name: str) -> bool:
    return len(name) <= DNS_LABEL_MAX and bool(_DNS_1035.match(name))


# --- Kubernetes object names, labels and annotations -----------------------------------
# The rules of k8s.io/apimachinery/pkg/util/validation (validation.go) and
# pkg/api/validation/objectmeta.go, which the API server applies; the
# manifests' JSON schemas don't encode them.
# https://github.com/kubernetes/apimachinery/blob/master/pkg/util/validation/validation.go
# https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set
DNS_1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_SUBDOMAIN_MAX = 253
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
QUALIFIED_NAME_MAX = 63
LABEL_VALUE_MAX = 63
# The sum of an object's annotation keys and values (TotalAnnotationSizeLimitB).
ANNOTATIONS_MAX_BYTES = 256 * 1024
# A port name: an IANA service name (IsValidPortName).
PORT_NAME_MAX = 15
_PORT_NAME = re.compile(r"^[-a-z0-9]+$")
# A container env var name (IsEnvVarName).
_K8S_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")


def dns_1123_label_problem(value: str) -> str | None:
    if len(value) > DNS_LABEL_MAX:
        return f"has {len(value)} characters; a DNS-1123 label has at most {DNS_LABEL_MAX}"
    if not DNS_1123_LABEL.match(value):
        return "is not a DNS-1123 label (lower-case letters, digits and '-', starting and ending alphanumeric)"
    return None


def dns_1123_subdomain_problem(value: str) -> str | None:
    if len(value) > DNS_SUBDOMAIN_MAX:
        return f"has {len(value)} characters; a DNS-1123 subdomain has at most {DNS_SUBDOMAIN_MAX}"
    if not DNS_1123_SUBDOMAIN.match(value):
        return "is not a DNS-1123 subdomain (lower-case alphanumeric labels joined by '.')"
    return None


def qualified_name_problem(key: str) -> str | None:
    """Why `key` is not a label or annotation key: `[prefix/]name`, prefix a DNS subdomain."""
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return "has an empty prefix before '/'"
    if prefix and dns_1123_subdomain_problem(prefix):
        return f"has prefix {prefix!r}, which {dns_1123_subdomain_problem(prefix)}"
    if len(name) > QUALIFIED_NAME_MAX:
        return f"has a name part of {len(name)} characters; at most {QUALIFIED_NAME_MAX}"
    if not _QUALIFIED_NAME.match(name):
        return "has a name part that is not alphanumeric, '-', '_' or '.' between alphanumerics"
    return None


def label_value_problem(value: str) -> str | None:
    if len(value) > LABEL_VALUE_MAX:
        return f"has {len(value)} characters; a label value has at most {LABEL_VALUE_MAX}"
    if not _LABEL_VALUE.match(value):
        return "is not a label value (alphanumeric, '-', '_' or '.' between alphanumerics; no '/')"
    return None


def port_name_problem(name: str) -> str | None:
    ok = (len(name) <= PORT_NAME_MAX and _PORT_NAME.match(name) and any(c.isalpha() for c in name)
          and not name.startswith("-") and not name.endswith("-") and "--" not in name)
    return None if ok else f"is not a port name (an IANA service name: at most {PORT_NAME_MAX} lower-case " \
                           "alphanumerics and single inner '-', with a letter)"


def env_name_problem(name: str) -> str | None:
    if name in (".", "..") or not _K8S_ENV_NAME.match(name):
        return "is not an environment variable name (letters, digits, '-', '.', '_', not starting with a digit)"
    return None
