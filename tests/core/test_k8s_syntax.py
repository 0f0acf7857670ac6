"""Kubernetes' name, label and annotation rules (apimachinery validation.go), each firing on a bad case."""

import pytest

from core import quantity, syntax


@pytest.mark.parametrize("key", ["gke-finetune/pool", "cloud.google.com/gke-tpu-topology", "app", "a.b_c-d"])
def test_good_label_keys(key):
    assert syntax.qualified_name_problem(key) is None


@pytest.mark.parametrize("key, needle", [
    ("/x", "empty prefix"),
    ("Bad_Prefix.io/x", "prefix"),
    ("a/b/c", "prefix"),
    ("x" * 64, "64 characters"),
    ("-x", "name part"),
    ("x.", "name part"),
])  # fmt: skip
def test_bad_label_keys(key, needle):
    assert needle in syntax.qualified_name_problem(key)


@pytest.mark.parametrize("value", ["", "tpu-v6e-slice", "2x4", "a" * 63, "A.b_c-1"])
def test_good_label_values(value):
    assert syntax.label_value_problem(value) is None


@pytest.mark.parametrize("value, needle", [
    ("projects/p/reservations/r", "no '/'"),     # a shared reservation's path is no label value
    ("a" * 64, "64 characters"),
    ("-a", "label value"),
    ("a b", "label value"),
])  # fmt: skip
def test_bad_label_values(value, needle):
    assert needle in syntax.label_value_problem(value)


@pytest.mark.parametrize("name, ok", [
    ("tpu-runtime", True), ("xprof", True), ("a-very-long-port", False), ("8471", False),
    ("-x", False), ("a--b", False), ("Port", False),
])  # fmt: skip
def test_port_names(name, ok):
    assert (syntax.port_name_problem(name) is None) is ok


@pytest.mark.parametrize("name, ok", [("trainer", True), ("Trainer", False), ("a" * 64, False), ("a.b", False)])
def test_dns_labels(name, ok):
    assert (syntax.dns_1123_label_problem(name) is None) is ok


@pytest.mark.parametrize("text, value", [
    ("500m", 0.5), ("4", 4), ("1Gi", 2**30), ("1200Gi", 1200 * 2**30), ("10G", 10**10), ("1.5Ki", 1536),
])  # fmt: skip
def test_quantities(text, value):
    assert float(quantity.parse(text)) == pytest.approx(value)


@pytest.mark.parametrize("text", ["", "Gi", "1 Gi", "1gi", "1.2.3"])
def test_bad_quantities(text):
    with pytest.raises(quantity.QuantityError):
        quantity.parse(text)


def test_quantities_in_the_form_the_api_server_writes_them_back():
    """k8s.io/apimachinery quantity.go CanonicalizeBytes: the largest suffix that keeps the number whole."""
    from core.quantity import canonical_bytes, canonical_millis

    assert canonical_bytes(10956800 * 2**20) == "10700Gi" and canonical_bytes(1376256 * 2**20) == "1344Gi"
    assert canonical_bytes(3 * 2**40) == "3Ti" and canonical_bytes(1000) == "1000" and canonical_bytes(3072) == "3Ki"
    assert canonical_bytes(2**20 + 1) == "1048577" and canonical_bytes(1536) == "1536"
    assert canonical_millis(354000) == "354" and canonical_millis(179500) == "179500m"
    assert canonical_millis(2_000_000) == "2k" and canonical_millis(0) == "0"
