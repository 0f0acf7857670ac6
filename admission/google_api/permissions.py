"""Every Google API request `pulumi up` and `destroy` make, the IAM permission each needs, and the predefined
role that grants it: the deploy identity's roles, derived rather than guessed.

The requests of a declared resource are the create method the mapping tables name (judge.MAPPINGS, the
request the Google API check judges) and the reads, updates and deletes the provider makes over the
resource's life (`LIFECYCLE`: terraform-provider-google-beta's Read/Update/Delete functions and the
operations it polls). The program makes others: the invokes it calls (`INVOKES`), the Kubernetes API its
Kubernetes provider calls, the image pushes, Cloud Build, the state backend (`OTHERS`).

Each `Call` names the permission Google documents for the method — on the method's REST reference page,
"Authorization requires the following IAM permission" (`reference`), for GKE on one page
(https://cloud.google.com/kubernetes-engine/docs/reference/api-permissions), for Cloud Storage's JSON
API on https://cloud.google.com/storage/docs/access-control/iam-json — and the predefined role granted
for it (https://cloud.google.com/iam/docs/roles-permissions/<service> lists each role's permissions).
`requests(resources)` is what a stack's declared resources ask of Google, `uncovered` what has no row
(the tests fail on it), `roles` the roles a deploy identity needs, each with where it is granted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from admission.google_api.judge import MAPPINGS, is_google_cloud

PROJECT = "the project"
TOKEN_SECRET = "the Hugging Face token's secret"
STATE_BUCKET = "the state bucket"
NODE_ACCOUNTS = "the project (or each node service account)"


@dataclass(frozen=True)
class Need:
    permission: str
    role: str
    scope: str = PROJECT


@dataclass(frozen=True)
class Call:
    api: str  # the discovery document ("compute.beta"); "" for a request no discovery document describes
    method: str  # the method id, or what the request is (`docker push`)
    needs: tuple[Need, ...]


def _calls(api: str, role: str, rows: Mapping[str, str | tuple[str, ...]], scope: str = PROJECT) -> list[Call]:
    def needs(permissions) -> tuple[Need, ...]:
        return tuple(Need(p, role, scope) for p in ((permissions,) if isinstance(permissions, str) else permissions))
    return [Call(api, method, needs(permissions)) for method, permissions in rows.items()]


_GKE, _COMPUTE, _STORAGE = "container.v1beta1", "compute.beta", "storage.v1"
_CLUSTERS = "container.projects.locations.clusters"
CALLS: tuple[Call, ...] = (
    # GKE: https://cloud.google.com/kubernetes-engine/docs/reference/api-permissions
    Call(_GKE, f"{_CLUSTERS}.create", (Need("container.clusters.create", "roles/container.admin"),
                                       Need("iam.serviceAccounts.actAs", "roles/iam.serviceAccountUser", NODE_ACCOUNTS))),
    *_calls(_GKE, "roles/container.admin", {
        f"{_CLUSTERS}.get": "container.clusters.get", f"{_CLUSTERS}.update": "container.clusters.update",
        f"{_CLUSTERS}.delete": "container.clusters.delete", "container.projects.locations.operations.get":
        "container.operations.get", f"{_CLUSTERS}.nodePools.create": "container.clusters.update",
        f"{_CLUSTERS}.nodePools.get": "container.clusters.get", f"{_CLUSTERS}.nodePools.update":
        "container.clusters.update", f"{_CLUSTERS}.nodePools.setAutoscaling": "container.clusters.update",
        f"{_CLUSTERS}.nodePools.setManagement": "container.clusters.update", f"{_CLUSTERS}.nodePools.setSize":
        "container.clusters.update", f"{_CLUSTERS}.nodePools.delete": "container.clusters.update"}),
    # Compute: https://cloud.google.com/compute/docs/reference/rest/beta/<collection>/<verb>, "IAM Permissions".
    *_calls(_COMPUTE, "roles/compute.networkAdmin", {
        "compute.networks.insert": "compute.networks.create", "compute.networks.get": "compute.networks.get",
        "compute.networks.patch": "compute.networks.update", "compute.networks.delete": "compute.networks.delete",
        "compute.subnetworks.insert": "compute.subnetworks.create", "compute.subnetworks.get":
        "compute.subnetworks.get", "compute.subnetworks.patch": "compute.subnetworks.update",
        "compute.subnetworks.setPrivateIpGoogleAccess": "compute.subnetworks.setPrivateIpGoogleAccess",
        "compute.subnetworks.delete": "compute.subnetworks.delete", "compute.routers.insert": "compute.routers.create",
        "compute.routers.get": "compute.routers.get", "compute.routers.patch": "compute.routers.update",
        "compute.routers.delete": "compute.routers.delete", "compute.globalOperations.get":
        "compute.globalOperations.get", "compute.regionOperations.get": "compute.regionOperations.get"}),
    # A firewall rule is a security control: Compute Security Admin, not Network Admin, creates one.
    *_calls(_COMPUTE, "roles/compute.securityAdmin", {
        "compute.firewalls.insert": ("compute.firewalls.create", "compute.networks.updatePolicy"),
        "compute.firewalls.get": "compute.firewalls.get", "compute.firewalls.patch":
        ("compute.firewalls.update", "compute.networks.updatePolicy"), "compute.firewalls.delete":
        ("compute.firewalls.delete", "compute.networks.updatePolicy")}),
    # Cloud Storage JSON API: https://cloud.google.com/storage/docs/access-control/iam-json
    *_calls(_STORAGE, "roles/storage.admin", {
        "storage.buckets.insert": "storage.buckets.create", "storage.buckets.get": "storage.buckets.get",
        "storage.buckets.patch": "storage.buckets.update", "storage.buckets.delete": "storage.buckets.delete",
        "storage.buckets.getIamPolicy": "storage.buckets.getIamPolicy", "storage.buckets.setIamPolicy":
        "storage.buckets.setIamPolicy", "storage.objects.insert": "storage.objects.create", "storage.objects.get":
        "storage.objects.get", "storage.objects.delete": "storage.objects.delete", "storage.folders.insert":
        "storage.folders.create", "storage.folders.get": "storage.folders.get", "storage.folders.delete":
        "storage.folders.delete"}),
    *_calls("serviceusage.v1", "roles/serviceusage.serviceUsageAdmin", {
        "serviceusage.services.batchEnable": "serviceusage.services.enable", "serviceusage.services.get":
        "serviceusage.services.get", "serviceusage.services.list": "serviceusage.services.list",
        "serviceusage.operations.get": "serviceusage.operations.get"}),
    *_calls("iam.v1", "roles/iam.serviceAccountAdmin", {
        "iam.projects.serviceAccounts.create": "iam.serviceAccounts.create", "iam.projects.serviceAccounts.get":
        "iam.serviceAccounts.get", "iam.projects.serviceAccounts.patch": "iam.serviceAccounts.update",
        "iam.projects.serviceAccounts.delete": "iam.serviceAccounts.delete"}),
    *_calls("cloudresourcemanager.v1", "roles/resourcemanager.projectIamAdmin", {
        "cloudresourcemanager.projects.get": "resourcemanager.projects.get",
        "cloudresourcemanager.projects.getIamPolicy": "resourcemanager.projects.getIamPolicy",
        "cloudresourcemanager.projects.setIamPolicy": "resourcemanager.projects.setIamPolicy"}),
    *_calls("artifactregistry.v1", "roles/artifactregistry.admin", {
        f"artifactregistry.projects.locations.repositories.{verb}": f"artifactregistry.repositories.{perm}"
        for verb, perm in (("create", "create"), ("get", "get"), ("patch", "update"), ("delete", "delete"),
                           ("getIamPolicy", "getIamPolicy"), ("setIamPolicy", "setIamPolicy"))}),
    # The grant on the token's secret only: granted on that secret, the role reaches no other secret.
    *_calls("secretmanager.v1", "roles/secretmanager.admin", {
        "secretmanager.projects.secrets.getIamPolicy": "secretmanager.secrets.getIamPolicy",
        "secretmanager.projects.secrets.setIamPolicy": "secretmanager.secrets.setIamPolicy"}, TOKEN_SECRET),
    # `gcloud builds submit` (imageBuilder: cloudbuild): the build, its source uploaded to the project's
    # gs://<project>_cloudbuild bucket, the image's digest read back.
    *_calls("cloudbuild.v1", "roles/cloudbuild.builds.editor", {
        "cloudbuild.projects.locations.builds.create": "cloudbuild.builds.create",
        "cloudbuild.projects.locations.builds.get": "cloudbuild.builds.get"}),
    *_calls("artifactregistry.v1", "roles/artifactregistry.admin", {
        "artifactregistry.projects.locations.repositories.dockerImages.get": "artifactregistry.dockerimages.get"}),
    # Requests no discovery document describes.
    *_calls("", "roles/artifactregistry.admin", {
        "docker push (Artifact Registry's Docker API)": "artifactregistry.repositories.uploadArtifacts"}),
    *_calls("", "roles/container.admin", {
        "Kubernetes API (the stack's objects, its Helm releases, CRDs)": ("container.clusters.get",
                                                                          "container.clusters.getCredentials")}),
    *_calls("", "roles/storage.objectAdmin", {
        "state backend (gs://): read, write and lock the stack's state": (
            "storage.objects.get", "storage.objects.create", "storage.objects.delete", "storage.objects.list")},
        STATE_BUCKET),
)
BY_METHOD: dict[str, Call] = {c.method: c for c in CALLS}

# What the provider calls besides a resource's create method, over the resource's life (its Read, Update
# and Delete functions, the long-running operations it waits for).
_OPS = {"gke": "container.projects.locations.operations.get", "global": "compute.globalOperations.get",
        "region": "compute.regionOperations.get"}
LIFECYCLE: dict[str, tuple[str, ...]] = {
    "gcp:container/cluster:Cluster": (f"{_CLUSTERS}.get", f"{_CLUSTERS}.update", f"{_CLUSTERS}.delete",
                                      f"{_CLUSTERS}.nodePools.delete", _OPS["gke"]),  # removeDefaultNodePool
    "gcp:container/nodePool:NodePool": (f"{_CLUSTERS}.nodePools.get", f"{_CLUSTERS}.nodePools.update",
                                        f"{_CLUSTERS}.nodePools.setAutoscaling", f"{_CLUSTERS}.nodePools.setManagement",
                                        f"{_CLUSTERS}.nodePools.setSize", f"{_CLUSTERS}.nodePools.delete", _OPS["gke"]),
    "gcp:compute/network:Network": ("compute.networks.get", "compute.networks.patch", "compute.networks.delete",
                                    _OPS["global"]),
    "gcp:compute/subnetwork:Subnetwork": ("compute.subnetworks.get", "compute.subnetworks.patch",
                                          "compute.subnetworks.setPrivateIpGoogleAccess", "compute.subnetworks.delete",
                                          _OPS["region"]),
    "gcp:compute/router:Router": ("compute.routers.get", "compute.routers.patch", "compute.routers.delete",
                                  _OPS["region"]),
    # A NAT is a patch of its router: read, patched in, patched out.
    "gcp:compute/routerNat:RouterNat": ("compute.routers.get", _OPS["region"]),
    "gcp:compute/firewall:Firewall": ("compute.firewalls.get", "compute.firewalls.patch", "compute.firewalls.delete",
                                      _OPS["global"]),
    "gcp:storage/bucket:Bucket": ("storage.buckets.get", "storage.buckets.patch", "storage.buckets.delete"),
    # IAM members are read-modify-writes of the resource's policy (resourceIamMemberCreate/Delete).
    "gcp:storage/bucketIAMMember:BucketIAMMember": ("storage.buckets.getIamPolicy",),
    "gcp:storage/bucketObject:BucketObject": ("storage.objects.get", "storage.objects.delete"),
    "gcp:storage/folder:Folder": ("storage.folders.get", "storage.folders.delete"),
    "gcp:projects/service:Service": ("serviceusage.services.get", "serviceusage.services.list",
                                     "serviceusage.operations.get"),
    "gcp:serviceaccount/account:Account": ("iam.projects.serviceAccounts.get", "iam.projects.serviceAccounts.patch",
                                           "iam.projects.serviceAccounts.delete"),
    "gcp:projects/iAMMember:IAMMember": ("cloudresourcemanager.projects.getIamPolicy",),
    "gcp:artifactregistry/repository:Repository": ("artifactregistry.projects.locations.repositories.get",
                                                   "artifactregistry.projects.locations.repositories.patch",
                                                   "artifactregistry.projects.locations.repositories.delete"),
    "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember": (
        "artifactregistry.projects.locations.repositories.getIamPolicy",),
    "gcp:secretmanager/secretIamMember:SecretIamMember": ("secretmanager.projects.secrets.getIamPolicy",),
}
# The invokes the components call (a read each), by their Pulumi token.
INVOKES: dict[str, str] = {
    "gcp:organizations/getProject:getProject": "cloudresourcemanager.projects.get",
    "gcp:container/getCluster:getCluster": f"{_CLUSTERS}.get",
}
KUBERNETES = "Kubernetes API (the stack's objects, its Helm releases, CRDs)"
DOCKER_PUSH = "docker push (Artifact Registry's Docker API)"
STATE = "state backend (gs://): read, write and lock the stack's state"
CLOUD_BUILD = ("cloudbuild.projects.locations.builds.create", "cloudbuild.projects.locations.builds.get",
               "storage.buckets.get", "storage.buckets.insert", "storage.objects.insert",  # the source, to gs://<project>_cloudbuild
               "artifactregistry.projects.locations.repositories.dockerImages.get")


def resource_requests(type_token: str) -> tuple[str, ...]:
    """The methods the provider calls for one resource of `type_token`, its create first."""
    mapping = MAPPINGS.get(type_token)
    return ((mapping.method,) if mapping else ()) + LIFECYCLE.get(type_token, ())


def requests(resources: Iterable[tuple[str, str, Mapping[str, Any]]]) -> list[str]:
    """Every request a stack's declared resources make of Google, each once, in a stable order."""
    found: dict[str, None] = {STATE: None}
    for type_token, _name, inputs in resources:
        if is_google_cloud(type_token):
            found.update(dict.fromkeys(resource_requests(type_token)))
            if type_token not in LIFECYCLE:  # its reads and deletes unknown: a gap, as an uncovered request
                found[f"{type_token}: no lifecycle row"] = None
        elif type_token.startswith("kubernetes:"):
            found[KUBERNETES] = None
        elif type_token == "docker-build:index:Image":
            found[DOCKER_PUSH] = None
        elif type_token == "command:local:Command" and "gcloud builds submit" in str(inputs.get("create", "")):
            found.update(dict.fromkeys(CLOUD_BUILD))
    found.update(dict.fromkeys(INVOKES.values()))
    return list(found)


def uncovered(methods: Iterable[str]) -> list[str]:
    """The requests with no row in the table: each is a permission nobody granted."""
    return [m for m in methods if m not in BY_METHOD]


def roles(methods: Iterable[str]) -> dict[tuple[str, str], list[str]]:
    """(role, where it is granted) -> the permissions it is granted for, over `methods`."""
    out: dict[tuple[str, str], list[str]] = {}
    for method in methods:
        for need in BY_METHOD[method].needs:
            held = out.setdefault((need.role, need.scope), [])
            if need.permission not in held:
                held.append(need.permission)
    return dict(sorted(out.items()))


def reference(call: Call) -> str:
    """Google's page that names the permission of `call`."""
    service = call.method.split(".", 1)[0]
    pages = {"container": "https://cloud.google.com/kubernetes-engine/docs/reference/api-permissions",
             "storage": "https://cloud.google.com/storage/docs/access-control/iam-json"}
    if not call.api:
        return "https://cloud.google.com/iam/docs/roles-permissions/" + call.needs[0].permission.split(".", 1)[0]
    if service in pages:
        return pages[service]
    collection, _, verb = call.method.partition(".")[2].rpartition(".")
    base = {"compute": "https://cloud.google.com/compute/docs/reference/rest/beta",
            "serviceusage": "https://cloud.google.com/service-usage/docs/reference/rest/v1",
            "iam": "https://cloud.google.com/iam/docs/reference/rest/v1",
            "cloudresourcemanager": "https://cloud.google.com/resource-manager/reference/rest/v1",
            "artifactregistry": "https://cloud.google.com/artifact-registry/docs/reference/rest/v1",
            "secretmanager": "https://cloud.google.com/secret-manager/docs/reference/rest/v1",
            "cloudbuild": "https://cloud.google.com/build/docs/reference/rest/v1"}[service]
    return f"{base}/{collection}/{verb}"


def markdown(methods: Iterable[str]) -> str:
    """The table docs/ci.md shows: request, permission, role (where), Google's reference."""
    lines = ["| request | permission | predefined role (granted on) | Google's reference |", "|---|---|---|---|"]
    for method in sorted(set(methods), key=lambda m: (BY_METHOD[m].needs[0].role, m)):
        call = BY_METHOD[method]
        for need in call.needs:
            where = "" if need.scope == PROJECT else f" ({need.scope})"
            lines.append(f"| `{method}` | `{need.permission}` | `{need.role}`{where} | {reference(call)} |")
    return "\n".join(lines)
