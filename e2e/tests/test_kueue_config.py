"""The Kueue configuration the stack installs, as the real kueue-manager (v0.19.2) loads it.

The manager decodes its configuration strictly before it connects to any
cluster (cmd/kueue/main.go: "Unable to load the configuration" on an unknown
or mistyped field), so this needs no control plane: a field the API doesn't
have, or a duration it can't parse, fails here rather than in a team's
cluster, where the chart's Deployment would crash-loop after `up`.
"""

from __future__ import annotations

import json
import subprocess

import yaml

from e2e.harness.tools import tools
from manifests.controllers import kueue_chart_values
from stack.sharing import KueueSettings


def _loaded(config_text: str, tmp_path) -> subprocess.CompletedProcess:
    path = tmp_path / "config.yaml"
    path.write_text(config_text)
    manager = tools(("kueue",)).bin("kueue-manager")
    # No cluster: it stops at the kubeconfig, after loading (or refusing) the configuration.
    return subprocess.run([str(manager), "--config", str(path)], capture_output=True, text=True, timeout=60,
                          env={"KUBECONFIG": str(tmp_path / "none"), "PATH": "/usr/bin:/bin"})


def _logged_config(result: subprocess.CompletedProcess) -> dict:
    for line in result.stderr.splitlines() + result.stdout.splitlines():
        record = json.loads(line) if line.startswith("{") else {}
        if record.get("msg") == "Configuration loaded":
            return yaml.safe_load(record["config"])
    raise AssertionError(f"kueue-manager did not load the configuration:\n{result.stderr[-2000:]}")


def test_the_real_kueue_manager_loads_the_stacks_configuration_with_wait_for_pods_ready(tmp_path):
    settings = KueueSettings.model_validate({"podsReadyTimeoutSeconds": 900, "requeueLimit": 4})
    text = kueue_chart_values("team-a", settings)["managerConfig"]["controllerManagerConfigYaml"]
    loaded = _logged_config(_loaded(text, tmp_path))
    ready = loaded["waitForPodsReady"]
    assert ready["timeout"] == "15m0s"
    assert ready["requeuingStrategy"] == {"timestamp": "Eviction", "backoffLimitCount": 4,
                                          "backoffBaseSeconds": 60, "backoffMaxSeconds": 3600}
    assert loaded["managedJobsNamespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "team-a"}}


def test_the_real_kueue_manager_refuses_a_mistyped_field(tmp_path):
    """The check above can fail: the same manager refuses a configuration with a field it doesn't know."""
    text = kueue_chart_values("team-a")["managerConfig"]["controllerManagerConfigYaml"]
    result = _loaded(text.replace("backoffLimitCount", "backofLimitCount"), tmp_path)
    assert "Unable to load the configuration" in result.stderr + result.stdout
    assert "backofLimitCount" in result.stderr + result.stdout
