"""`make handoff STACK=<stack>`: what a platform team applies so that an existing-cluster stack can deploy.

    python -m tools.plan handoff --stack existing-dev [--user NAME | --group NAME ...] [--out DIR]

Three parts, each derived from what the stack declares (the real program under
the SDK's mocks, tools/offline.py):

1. Kubernetes RBAC, as YAML for `kubectl apply -f`: a Role and RoleBinding in
   the stack's namespace, a ClusterRole and ClusterRoleBinding for the
   cluster-scoped objects it names, with the verbs the Kubernetes provider
   uses (tools/plan/rbac.py);
2. Google Cloud IAM, as gcloud commands: what the deploying identity needs to
   reach the cluster, and the bucket grants of the stack's workload
   identities (those `existingCluster.bucketGrants: true` would declare);
3. the firewall rule the controllers' webhooks need on a cluster with private
   nodes, where the stack installs the controllers.

`--out DIR` writes `rbac.yaml` and `gcloud.sh` there besides printing them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from core.ids import webhook_firewall_name
from manifests.controllers import webhook_ports
from stack.config import StackConfig
from stack.controller_releases import ControllerInstall
from stack.problems import MISSING, ConfigError, Problem
from stack.reader import load_files
from tools import offline
from tools.files import OwnedFiles
from tools.plan.rbac import Rights, declared, rbac_documents, rights

PROJECT_NUMBER_STAND_IN = "999999999999"  # a valid number, replaced by $PROJECT_NUMBER in the commands
BUCKET_IAM = "gcp:storage/bucketIAMMember:BucketIAMMember"
CLUSTER_ACCESS = ("container.clusters.get", "container.clusters.connect")


@dataclass(frozen=True)
class Handoff:
    stack: str
    rights: Rights
    rbac: list[dict]
    gcloud: list[str]
    placeholder: bool = False  # no subject was given: DEPLOYER stands in

    def text(self) -> str:
        lines = [f"# make handoff STACK={self.stack}: what the platform team applies for this stack."]
        if self.placeholder:
            lines.append("# DEPLOYER stands for who deploys it: pass --user, --group or --service-account "
                         "(HANDOFF_ARGS=...), or replace it.")
        lines += ["",
                 "# 1. Kubernetes RBAC (kubectl apply -f <this part>): the verbs the Kubernetes provider uses on "
                 "the objects the stack declares"]
        lines += [f"#   not covered: {line}" for line in self.rights.not_covered]
        lines.append(yaml.safe_dump_all(self.rbac, sort_keys=False).rstrip())
        lines += ["", "# 2 and 3. Google Cloud IAM and the webhooks' firewall rule (a shell script):", *self.gcloud]
        return "\n".join(lines)


def stack_resources(config: StackConfig, root: Path) -> list[dict]:
    """The stack's resources under mocks, as if it declared its bucket grants (their bindings are handed off)."""
    existing = {**offline.file_values(config.stack, root).get(f"{offline.PROJECT}:existingCluster", {}),
                "bucketGrants": True}
    overrides = {f"{offline.PROJECT}:existingCluster": existing}
    if not config.project_number:
        overrides[f"{offline.PROJECT}:projectNumber"] = PROJECT_NUMBER_STAND_IN
    deployment = offline.run_stack(config.stack, overrides=overrides, root=root)
    return [{"type": r.type, "name": r.name, "inputs": r.inputs} for r in deployment.resources]


def used_controllers(config: StackConfig) -> dict[str, ControllerInstall]:
    """The installed controllers whose Deployments (and Kueue's configuration) the preview reads, each as
    `existingCluster.controllerReleases` says it is installed: those the stack's runs need, where the platform
    team installed them (`controllers: existing`)."""
    from components.preflight import needed_controllers  # pylint: disable=import-outside-toplevel

    if config.existing.controllers != "existing":
        return {}
    return {c: config.existing.controller_releases.install(c) for c in needed_controllers(config)}


def _q(value: str) -> str:
    """`value` single-quoted for the shell, with the project number stand-in replaced by $PROJECT_NUMBER."""
    quoted = "'" + value.replace("'", "'\\''") + "'"
    return quoted.replace(PROJECT_NUMBER_STAND_IN, "'\"$PROJECT_NUMBER\"'")


def cluster_access(config: StackConfig, members: list[str]) -> list[str]:
    """The deploying identity's IAM: get the cluster (gke-gcloud-auth-plugin's credentials are only admitted with
    container.clusters.get; RBAC above authorizes the rest) and connect through its DNS-based endpoint.
    https://cloud.google.com/kubernetes-engine/docs/how-to/role-based-access-control#iam-interaction
    https://cloud.google.com/kubernetes-engine/docs/concepts/network-isolation#dns-based_endpoint"""
    role = "gkeFinetuneClusterAccess"
    lines = ["# The deploying identity may reach the cluster (Kubernetes RBAC, above, decides what it may do there):",
             f"gcloud iam roles create {role} --project {_q(config.project)} --title 'gke-finetune cluster access' "
             f"--permissions {','.join(CLUSTER_ACCESS)}"]
    lines += [f"gcloud projects add-iam-policy-binding {_q(config.project)} --member {_q(m)} "
              f"--role projects/{config.project}/roles/{role} --condition None" for m in members]
    return lines


def bucket_grants(config: StackConfig, resources: list[dict]) -> list[str]:
    """The workload identities' bucket bindings, as the stack declares them with `bucketGrants: true`."""
    if config.existing.bucket_grants:
        return ["# The bucket grants: the stack declares them itself (existingCluster.bucketGrants: true)."]
    lines = ["# The stack's workload identities on the bucket (what existingCluster.bucketGrants: true would declare):",
             f"PROJECT_NUMBER=$(gcloud projects describe {_q(config.project)} --format='value(projectNumber)')"]
    for r in (r for r in resources if r["type"] == BUCKET_IAM):
        i = r["inputs"]
        command = (f"gcloud storage buckets add-iam-policy-binding gs://{i['bucket']} --member {_q(i['member'])} "
                   f"--role {i['role']}")
        if i.get("condition"):
            c = i["condition"]
            command += " --condition " + _q(f"expression={c['expression']},title={c['title']},"
                                            f"description={c['description']}")
        lines.append(command)
    return lines


def firewall(config: StackConfig) -> list[str]:
    """The rule from the control plane to the nodes' webhook ports, where the stack installs the controllers.
    GKE's own rule opens 443 and 10250 only (components/firewall.py says more):
    https://cloud.google.com/kubernetes-engine/docs/how-to/latest/network-isolation#add_firewall_rules"""
    ports = ",".join(f"tcp:{p}" for p in webhook_ports(kueue=bool(config.kueue_flavors())))
    if config.existing.controllers != "install":
        return [f"# The webhooks' firewall rule: the controllers are the platform team's (controllers: existing); on a "
                f"cluster with private nodes their rule ({ports}) lets the control plane reach them."]
    name, location = cluster_name(config)
    return [
        "# The webhooks' firewall rule (a cluster with private nodes): the control plane to the nodes on "
        f"{ports}.",
        f"CLUSTER={_q(name)} LOCATION={_q(location)}",
        "NETWORK=$(gcloud container clusters describe \"$CLUSTER\" --location \"$LOCATION\" --project "
        f"{_q(config.project)} --format='value(network)')",
        "# The control plane's range and the nodes' network tag are those of GKE's own rule to the nodes "
        "(gke-<cluster>-<id>-master):",
        f"gcloud compute firewall-rules list --project {_q(config.project)} --filter \"name~^gke-$CLUSTER-\" "
        "--format 'table(name,sourceRanges.list(),targetTags.list())'",
        "# Set CONTROL_PLANE_RANGE and NODE_TAG to that rule's source range and target tag:",
        ": \"${CONTROL_PLANE_RANGE:?the source range of GKE's rule above}\" \"${NODE_TAG:?its target tag}\"",
        f"gcloud compute firewall-rules create {webhook_firewall_name(config.stack)} --project {_q(config.project)} "
        "--network \"$NETWORK\" --direction INGRESS --source-ranges \"$CONTROL_PLANE_RANGE\" --target-tags "
        f"\"$NODE_TAG\" --allow {ports}",
    ]


def cluster_name(config: StackConfig) -> tuple[str, str]:
    """The existing cluster's name and location: its keys, or its context's when gcloud wrote it
    (`gke_<project>_<location>_<name>`); else what to fill in."""
    existing = config.existing
    if existing.name:
        return existing.name, existing.location
    parts = existing.context.split("_")
    if len(parts) == 4 and parts[0] == "gke":
        return parts[3], parts[2]
    return "<the cluster's name>", "<its location>"


@dataclass(frozen=True)
class Subjects:
    """Who deploys the stack: Google accounts, groups (Google Groups for RBAC) and service accounts."""

    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    service_accounts: tuple[str, ...] = ()

    def rbac(self) -> list[dict]:
        kinds = [("User", u) for u in (*self.users, *self.service_accounts)] + [("Group", g) for g in self.groups]
        return [{"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name} for kind, name in kinds]

    def iam(self) -> list[str]:
        return ([f"user:{u}" for u in self.users] + [f"group:{g}" for g in self.groups]
                + [f"serviceAccount:{s}" for s in self.service_accounts])


# Who deploys, where the command was not told: to be replaced before anything is applied.
PLACEHOLDER = Subjects(users=("DEPLOYER",))


def handoff(stack: str, root: Path, subjects: Subjects = PLACEHOLDER) -> Handoff:
    config = load_files(stack, root)
    if config.existing is None:
        raise ConfigError([Problem("existingCluster", MISSING, "and the stack declares its own cluster and "
                                   "everything in it, so there is nothing to hand off",
                                   "a stack for an existing cluster (docs/existing-clusters.md)")])
    resources = stack_resources(config, root)
    objects, releases = declared(resources)
    found = rights(objects, config.runs_namespace, releases, used_controllers(config))
    gcloud = [*cluster_access(config, subjects.iam()), "", *bucket_grants(config, resources), "", *firewall(config)]
    return Handoff(stack, found, rbac_documents(found, f"gke-finetune-{stack}", subjects.rbac()), gcloud,
                   subjects == PLACEHOLDER)


def write(found: Handoff, out: Path) -> list[Path]:
    """rbac.yaml and gcloud.sh in `out`, written over only if handoff wrote them there before (tools/files.py);
    WriteRefused otherwise."""
    return OwnedFiles(out).write({"rbac.yaml": yaml.safe_dump_all(found.rbac, sort_keys=False),
                                  "gcloud.sh": "#!/bin/sh\nset -eu\n" + "\n".join(found.gcloud) + "\n"})
