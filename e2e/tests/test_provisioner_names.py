"""The queued-provisioning stand-in's resize request name: a label value (at most 63 characters, DNS-label
characters), whatever the length of the ProvisioningRequest's name Kueue gives it; the same request always
gets the same name, and two long requests that share their first 54 characters get two."""

from __future__ import annotations

import re

from e2e.harness.provisioner import resize_request_name

LABEL_VALUE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def test_a_short_request_name_is_its_own_resize_request_name():
    assert resize_request_name("run-abc12-check-1") == "run-abc12-check-1"
    assert resize_request_name("a" * 63) == "a" * 63


def test_a_long_request_name_is_cut_to_a_label_value_with_a_hash_of_the_whole():
    long_a = "workload-of-a-long-run-name-" + "x" * 200 + "-queued-check-1"
    long_b = long_a.replace("check-1", "check-2")
    names = [resize_request_name(n) for n in (long_a, long_b, "a" * 64, "a" * 53 + "-" + "b" * 200)]
    assert all(len(n) <= 63 and LABEL_VALUE.fullmatch(n) for n in names), names
    assert len(set(names)) == len(names)
    assert resize_request_name(long_a) == names[0]
