"""Test support: offline schema validation, the Pulumi mocks harness, example runs, the golden writer."""
