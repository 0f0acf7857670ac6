"""Contracts derived from the stack config, and the ids derived from the stack name."""

import pytest

from stack.config import StackConfig
from core.ids import SERVICE_ACCOUNT_ID_MAX, service_account_id
from core.names import POOL_LABEL

BASE = {"project": "my-project-id", "region": "us-east5", "zones": ["us-east5-b"]}
# A zone offering both TPU v6e and B200 (core/offerings.py), for the B200 pools.
BOTH = {"region": "us-central1", "zones": ["us-central1-b"]}
TPU_TOLERATION = {"key": "google.com/tpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
SPOT_TOLERATION = {"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}


def contracts(**changes):
    return StackConfig.from_mapping({**BASE, **changes}).contracts()


def test_standard_contract_selects_the_pool_and_tolerates_its_taints():
    c = contracts(pools=[{"name": "ms", "accelerator": "tpu-v6e", "topology": "4x4", "slices": 3,
                          "capacity": "spot"}])["ms"]
    assert c.node_selector == {
        "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
        "cloud.google.com/gke-tpu-topology": "4x4",
        POOL_LABEL: "ms",
        "cloud.google.com/gke-spot": "true",
    }
    assert c.tolerations == (TPU_TOLERATION, SPOT_TOLERATION)
    assert c.node_pool_names == ("ms-s0", "ms-s1", "ms-s2")
    assert (c.hosts_per_slice, c.chips_per_host, c.slices, c.total_chips) == (4, 4, 3, 48)
    assert c.spot and c.reservation is None and c.resource_name == "google.com/tpu"


def test_reservation_contract_on_standard_keeps_the_name():
    c = contracts(pools=[{"name": "a4", "accelerator": "nvidia-b200", "capacity": "reservation",
                          "reservation": "res-1"}], **BOTH)["a4"]
    assert c.reservation == "res-1" and c.node_pool_names == ("a4",)
    assert c.node_selector == {"cloud.google.com/gke-accelerator": "nvidia-b200", POOL_LABEL: "a4"}


@pytest.mark.parametrize("capacity, extra", [
    ("on-demand", {}),
    ("spot", {"cloud.google.com/gke-spot": "true"}),
    ("flex-start", {"cloud.google.com/gke-flex-start": "true"}),
    ("reservation", {"cloud.google.com/reservation-name": "r",
                     "cloud.google.com/reservation-affinity": "specific"}),
])
def test_autopilot_contract_selectors(capacity, extra):
    shape = {"name": "s", "accelerator": "tpu-v6e", "topology": "2x2", "capacity": capacity}
    if capacity == "reservation":
        shape["reservation"] = "r"
    c = contracts(mode="autopilot", shapes=[shape])["s"]
    assert c.node_selector == {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                               "cloud.google.com/gke-tpu-topology": "2x2", **extra}
    assert c.node_pool_names == ()
    assert POOL_LABEL not in c.node_selector


def test_a_shared_reservation_is_selected_by_short_name_and_project_on_autopilot():
    """Label values can't hold `/`: the path goes to the project label and the short name."""
    shape = {"name": "s", "accelerator": "nvidia-b200", "capacity": "reservation",
             "reservation": "projects/shared-capacity/reservations/a4-pool"}
    selector = contracts(mode="autopilot", shapes=[shape], **BOTH)["s"].node_selector
    assert selector["cloud.google.com/reservation-name"] == "a4-pool"
    assert selector["cloud.google.com/reservation-project"] == "shared-capacity"
    assert not [v for v in selector.values() if "/" in v]


def test_a_standard_pool_on_a_shared_reservation_selects_by_pool_label_only():
    pool = {"name": "a4", "accelerator": "nvidia-b200", "capacity": "reservation",
            "reservation": "projects/shared-capacity/reservations/a4-pool"}
    c = contracts(pools=[pool], **BOTH)["a4"]
    assert c.reservation == "projects/shared-capacity/reservations/a4-pool"  # for the pool's affinity
    assert not [k for k in c.node_selector if k.startswith("cloud.google.com/reservation-")]
    assert c.node_selector[POOL_LABEL] == "a4"


@pytest.mark.parametrize("stack", ["dev", "tpu-multislice", "a-very-long-stack-name-for-production-eu"])
def test_service_account_ids_fit_gcp_limits(stack):
    for role in ("nodes", "trainer"):
        sa = service_account_id(stack, role)
        assert 6 <= len(sa) <= SERVICE_ACCOUNT_ID_MAX and sa.endswith(role) and sa[0].isalpha()


def test_long_stack_names_stay_distinct():
    a = service_account_id("a-very-long-stack-name-for-production-eu", "trainer")
    b = service_account_id("a-very-long-stack-name-for-production-us", "trainer")
    assert a != b
