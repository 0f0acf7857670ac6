"""The project number the Workload Identity principals name: from the stack, or from the API."""

from unittest import mock

import pytest

from stack.problems import ConfigError
from tools import offline
from tools.offline import MOCK_PROJECT_NUMBER, run_stack

BUCKET_MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"
GIVEN = "987654321098"
GET_PROJECT = "gcp:organizations/getProject:getProject"


def _members(deployment) -> set:
    return {r.inputs.get("member") for r in deployment.of_type(BUCKET_MEMBER)}


def test_a_given_project_number_is_what_the_principals_name_even_on_preview():
    # Preview: the API call answers nothing here, as nothing is reachable; the given number is known.
    members = _members(run_stack("dev", overrides={"gke-finetune:projectNumber": GIVEN}, preview=True))
    assert members and all(isinstance(m, str) and f"/projects/{GIVEN}/" in m for m in members), members


def _invokes(overrides) -> list[str]:
    seen: list[str] = []
    real = offline._Mocks.call

    def recording(self, args):
        seen.append(args.token)
        return real(self, args)

    with mock.patch.object(offline._Mocks, "call", recording):
        run_stack("dev", overrides=overrides)
    return seen


def test_without_it_the_number_is_the_apis_and_with_it_the_api_is_not_called():
    members = _members(run_stack("dev"))
    assert members and all(f"/projects/{MOCK_PROJECT_NUMBER}/" in m for m in members), members
    assert GET_PROJECT in _invokes({})
    assert GET_PROJECT not in _invokes({"gke-finetune:projectNumber": GIVEN})


@pytest.mark.parametrize("bad", ["0123", "12ab", "1" * 21])
def test_a_project_number_that_is_not_one_is_refused_naming_the_key(bad):
    with pytest.raises(ConfigError) as refused:
        run_stack("dev", overrides={"gke-finetune:projectNumber": bad})
    assert any(p.startswith("projectNumber: ") and "is not a project number" in p for p in refused.value.problems), \
        refused.value.problems
