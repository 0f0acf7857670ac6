"""Syntax: every name, label, selector value and annotation of the manifests is valid Kubernetes."""

import copy

import pytest

from admission import syntax
from tests.support import goldens
from tools.render import shipped_stacks

STACKS = [goldens.EXAMPLES, *shipped_stacks()]
MANIFESTS = [pytest.param(m, id=f"{s}/{n}") for s in STACKS for n, m in goldens.manifests_for(s).items()]
POD = ("spec", "replicatedJobs", 0, "template", "spec", "template")


def _pod(manifest):
    node = manifest
    for step in POD:
        node = node[step]
    return node


@pytest.mark.parametrize("manifest", MANIFESTS)
def test_every_rendered_run_is_valid(manifest):
    assert syntax.jobset_findings(manifest) == []


@pytest.mark.parametrize("change, where, needle", [
    # A shared reservation's path in a selector (what runs used to carry).
    (lambda p: p["spec"]["nodeSelector"].update({"cloud.google.com/reservation-name": "projects/p/reservations/r"}),
     "nodeSelector[cloud.google.com/reservation-name]", "no '/'"),
    (lambda p: p["metadata"]["labels"].update({"bad key/x": "v"}), "metadata.labels", "not a valid key"),
    (lambda p: p["metadata"]["labels"].update({"ok": "x" * 64}), "metadata.labels[ok]", "64 characters"),
    (lambda p: p["metadata"]["annotations"].update({"-x": "1"}), "metadata.annotations", "not a valid key"),
    (lambda p: p["spec"]["containers"][0].setdefault("ports", []).append({"name": "xprof-profile-server", "containerPort": 1}),
     "ports", "port name"),
    (lambda p: p["spec"]["containers"][0]["env"].append({"name": "1X", "value": ""}), "env", "environment variable"),
    (lambda p: p["spec"]["volumes"].append({"name": "Data", "emptyDir": {}}), "volumes", "DNS-1123 label"),
    (lambda p: p["spec"].update({"serviceAccountName": "Trainer"}), "serviceAccountName", "DNS-1123 subdomain"),
])  # fmt: skip
def test_each_rule_fires_on_a_bad_case(change, where, needle):
    manifest = copy.deepcopy(goldens.manifests_for("dev")["gemma3-single-host"])
    change(_pod(manifest))
    findings = syntax.jobset_findings(manifest)
    assert len(findings) == 1, findings
    assert where in findings[0].where and needle in findings[0].why
    assert findings[0].source.startswith("https://kubernetes.io/docs/")


def test_annotations_over_256_kib_are_refused():
    manifest = copy.deepcopy(goldens.manifests_for("dev")["gemma3-single-host"])
    manifest["metadata"]["annotations"]["big"] = "x" * (256 * 1024)
    [finding] = syntax.jobset_findings(manifest)
    assert "exceed the 262144 bytes" in finding.why


KUEUE = [pytest.param(m, id=f"{s}/{k}") for s in shipped_stacks() for k, m in goldens.kueue_manifests_for(s).items()]


@pytest.mark.parametrize("manifest", KUEUE)
def test_every_kueue_object_is_valid(manifest):
    assert syntax.kueue_findings(manifest) == []


@pytest.mark.parametrize("change, where, needle", [
    (lambda m: m["spec"]["nodeLabels"].update({"gke-finetune/pool": "x" * 64}), "spec.nodeLabels[gke-finetune/pool]",
     "64 characters"),
    (lambda m: m["spec"]["nodeLabels"].update({"bad key": "v"}), "spec.nodeLabels", "not a valid key"),
    (lambda m: m["spec"]["tolerations"].append({"key": "-queued", "operator": "Exists"}), "spec.tolerations[1].key",
     "not a valid key"),
    (lambda m: m["metadata"].update({"name": "Queued_Pool"}), "metadata.name", "DNS-1123 subdomain"),
])  # fmt: skip
def test_each_rule_fires_on_a_bad_kueue_object(change, where, needle):
    manifest = copy.deepcopy(goldens.kueue_manifests_for("tpu-queued")["resourceflavor-finetune-queued-v6e-2x4-1e7dde"])
    change(manifest)
    [finding] = syntax.kueue_findings(manifest)
    assert where in finding.where and needle in finding.why
