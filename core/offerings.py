"""Where each accelerator is offered: the zones a pool of it may be placed in. Pure data, with sources.

A node pool in a zone that offers no such machine is accepted by `pulumi up` and then never gets a
node (GKE's autoscaler finds no machine type to create); the stack refuses it first
(stack/rules.py `offering_problems`). Where the tables are out of date, the machine types the
zones offer today are listed by `gcloud compute machine-types list --filter="name=<machine type>"`.

- TPU v6e (Trillium; GKE's ct6e-standard-* machine types): "All v6e configurations", TPU regions and
  zones, https://cloud.google.com/tpu/docs/regions-zones, read 2026-12-04 (zones offered to every
  project; the single-tenant zones the page also lists serve only their own reservations). The copy
  read lists North America and Europe in full; asia-northeast1-b and us-south1-a are v6e zones in
  use in public TPU scripts and SkyPilot's TPU v6e guide, where the copy's Asia Pacific list was cut.
- NVIDIA B200 (A4, a4-highgpu-8g): GPU regions and zones, https://cloud.google.com/compute/docs/gpus/gpu-regions-zones
  (the A4 rows), read 2026-12-04; us-central1-b and asia-southeast1-b are also the zones Batch
  recommends for A4 capacity from Dynamic Workload Scheduler (https://cloud.google.com/batch/docs/locations).
"""

from __future__ import annotations

SOURCES = {
    "tpu-v6e": "https://cloud.google.com/tpu/docs/regions-zones (read 2026-12-04)",
    "nvidia-b200": "https://cloud.google.com/compute/docs/gpus/gpu-regions-zones (read 2026-12-04)",
}
ZONES: dict[str, tuple[str, ...]] = {
    "tpu-v6e": ("us-central1-b", "us-east1-d", "us-east5-a", "us-east5-b", "us-south1-a", "europe-west4-a",
                "asia-northeast1-b"),
    "nvidia-b200": ("asia-northeast1-b", "asia-southeast1-b", "europe-west4-b", "us-central1-b", "us-east1-b",
                    "us-east4-b", "us-south1-b", "us-west2-c"),
}


def region_of(zone: str) -> str:
    return zone.rsplit("-", 1)[0]


def offered_zones(accelerator: str, region: str | None = None) -> tuple[str, ...]:
    """The zones offering the accelerator (in `region`, when given)."""
    zones = ZONES.get(accelerator, ())
    return tuple(z for z in zones if region is None or region_of(z) == region)


def offered_regions(accelerator: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(region_of(z) for z in ZONES.get(accelerator, ())))
