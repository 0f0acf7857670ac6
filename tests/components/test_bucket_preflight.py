"""The stack's bucket read before anything is declared (components/bucket_preflight.py), against answers built
from the Cloud Storage JSON API's documented responses (tests/support/bucket_answers.py): an existing bucket's
settings refused or warned about, the runs kept on their old prefixes, another stack of the same name, folders."""

from __future__ import annotations

import pytest

from components import bucket_preflight
from stack.problems import ConfigError
from stack.reader import file_values, model_values, validate
from tests.support import bucket_answers as a
from tests.support.pulumi_harness import ROOT, declared_before_error, run_stack

DEV_BUCKET, TEAM_BUCKET, RUN = "my-project-id-dev-finetune", "my-project-id-team-finetune", "gemma3-single-host"
DEV_TRAINER = a.principal("finetune", "dev-trainer")
TEAM_TRAINER = a.principal("ml-team", "existing-dev-trainer")


def config(stack: str, **overrides):
    values = file_values(stack, ROOT)
    values.update({f"gke-finetune:{k}": v for k, v in overrides.items()})
    return validate(model_values(values, stack))


def existing(grants: bool = False):
    cluster = {"context": "gke_my-project-id_us-east5_team-cluster", "controllers": "install", "bucketGrants": grants}
    return config("existing-dev", existingCluster=cluster, projectNumber="123456789012")


def answers(name: str, bucket: dict | None, policy: dict | None = None, **more) -> a.Answers:
    paths = a.bucket_paths(name)
    found = {paths["bucket"]: (200, bucket)} if bucket is not None else {}
    if policy is not None:
        found[paths["iam"]] = (200, policy)
    return a.Answers({**found, **more})


# --- an existing bucket's settings ----------------------------------------------------------------


def test_a_bucket_without_uniform_access_is_refused_where_the_stack_declares_conditional_grants():
    get = answers(TEAM_BUCKET, a.bucket(TEAM_BUCKET, uniform=False), a.policy()).get
    with pytest.raises(ConfigError) as err:
        bucket_preflight.check(existing(grants=True), get)
    [problem] = err.value.problems
    assert problem.startswith(f"bucketName: {TEAM_BUCKET!r} has uniform bucket-level access off "
                              "(iamConfiguration.uniformBucketLevelAccess.enabled: false)")
    assert "Cloud Storage refuses the stack's conditional grants" in problem
    assert problem.endswith(f"allowed: a bucket with uniform bucket-level access: `gcloud storage buckets update "
                            f"gs://{TEAM_BUCKET} --uniform-bucket-level-access` (ACLs stop applying)")


def test_nothing_is_declared_before_the_bucket_is_refused(monkeypatch):
    get = answers(TEAM_BUCKET, a.bucket(TEAM_BUCKET, uniform=False), a.policy()).get
    monkeypatch.setattr(bucket_preflight, "under_mocks", lambda: False)
    monkeypatch.setattr(bucket_preflight, "live_get", lambda: get)
    cluster = {"context": "gke_my-project-id_us-east5_team-cluster", "controllers": "install", "bucketGrants": True}
    declared, err = declared_before_error("existing-dev", overrides={
        "gke-finetune:existingCluster": cluster, "gke-finetune:projectNumber": "123456789012"})
    assert isinstance(err, ConfigError) and "uniform bucket-level access off" in str(err)
    assert [r.type for r in declared.resources if r.custom] == []


def test_settings_to_change_are_warnings_each_naming_the_setting_the_value_and_the_fix():
    # Hierarchical namespace needs uniform access (https://cloud.google.com/storage/docs/hns-overview): off too.
    bucket = a.bucket(TEAM_BUCKET, uniform=False, prevention="inherited", location="US", location_type="multi-region",
                      hierarchical=False)
    _, facts = bucket_preflight.check(existing(grants=False), answers(TEAM_BUCKET, bucket, a.policy()).get)
    assert facts.warnings == [
        f"iamConfiguration.uniformBucketLevelAccess.enabled: False on gs://{TEAM_BUCKET}: the platform team's grants "
        "can't be confined to the stack's prefixes (IAM Conditions need uniform bucket-level access), and object "
        f"ACLs still apply; fix: `gcloud storage buckets update gs://{TEAM_BUCKET} --uniform-bucket-level-access`",
        f"iamConfiguration.publicAccessPrevention: 'inherited' on gs://{TEAM_BUCKET}: a grant to allUsers or "
        "allAuthenticatedUsers would make checkpoints and data public (unless an organization policy enforces "
        f"prevention); fix: `gcloud storage buckets update gs://{TEAM_BUCKET} --public-access-prevention`",
        f"location: 'US' (multi-region) of gs://{TEAM_BUCKET} is not the cluster's region us-east5: every read pays "
        "outbound data transfer (a multi-region); fix: a bucket in us-east5 (bucketName), or the cluster in the "
        "bucket's region",
    ]


@pytest.mark.parametrize("location, kind, more, warned", [
    ("US-EAST5", "region", {}, False),
    ("US-CENTRAL1", "region", {}, True),
    ("NAM4", "dual-region", {}, True),  # us-central1 and us-east1
    ("US", "dual-region", {"customPlacementConfig": {"dataLocations": ["US-EAST5", "US-EAST4"]}}, False),
])
def test_the_location_is_judged_against_the_cluster_s_region(location, kind, more, warned):
    bucket = a.bucket(TEAM_BUCKET, location=location, location_type=kind, **more)
    _, facts = bucket_preflight.check(existing(), answers(TEAM_BUCKET, bucket, a.policy()).get)
    assert bool([w for w in facts.warnings if w.startswith("location:")]) is warned


def test_an_existing_bucket_that_is_not_there_is_refused_and_an_own_one_is_still_to_be_created():
    with pytest.raises(ConfigError) as err:
        bucket_preflight.check(existing(), a.Answers({}).get)
    assert err.value.problems == [f"bucketName: {TEAM_BUCKET!r} does not exist (buckets.get: 404); allowed: the "
                                  "name of the bucket the platform team made for the stack"]
    fresh = a.Answers({})
    cfg, facts = bucket_preflight.check(config("dev"), fresh.get)
    assert (facts.bucket, facts.legacy_runs, facts.warnings) == (None, frozenset(), [])
    assert fresh.asked == [f"b/{DEV_BUCKET}"]  # nothing else to read in a bucket still to be created


def test_what_can_t_be_read_is_not_judged_and_said_so():
    denied = a.Answers({f"b/{TEAM_BUCKET}": (403, a.error(403, "caller does not have storage.buckets.get"))})
    cfg, facts = bucket_preflight.check(existing(), denied.get)
    assert facts.warnings == [f"gs://{TEAM_BUCKET}: its settings, the runs' prefixes and folders not checked: HTTP 403: "
                              "caller does not have storage.buckets.get"]
    assert cfg.bucket_layout.legacy_runs == frozenset()


# --- the runs deployed before prefixes carried the stack ---------------------------------------


def legacy_answers(old: bool, new: bool, old_step: int = 40, new_step: int = 40, grant: bool = True) -> a.Answers:
    bindings = [a.write_binding(DEV_BUCKET, DEV_TRAINER, [f"checkpoints/{RUN}", f"profiles/{RUN}"])] if grant else []
    return answers(DEV_BUCKET, a.bucket(DEV_BUCKET), a.policy(*bindings), **{
        a.listed(DEV_BUCKET, f"checkpoints/{RUN}/"): (200, a.objects(*([f"checkpoints/{RUN}/40/x"] if old else []))),
        a.listed(DEV_BUCKET, f"checkpoints/dev/{RUN}/"): (200, a.objects(*([f"checkpoints/dev/{RUN}/40/x"] if new else []))),
        a.record_path(DEV_BUCKET, f"checkpoints/{RUN}"): (200, a.record(old_step)),
        a.record_path(DEV_BUCKET, f"checkpoints/dev/{RUN}"): (200, a.record(new_step)),
    })


@pytest.mark.parametrize("old, new, old_step, new_step, kept", [
    (True, False, 40, 40, True),    # deployed before: resumes from its old prefixes
    (True, True, 40, 40, False),    # migrated: the new ones
    (True, True, 60, 40, True),     # a checkpoint written to the old prefixes after the copy: migrate again
    (False, False, 0, 0, False),    # never wrote anything: the new ones
])
def test_a_run_keeps_the_prefixes_that_hold_its_progress(old, new, old_step, new_step, kept):
    cfg, facts = bucket_preflight.check(config("dev"), legacy_answers(old, new, old_step, new_step).get)
    assert (RUN in facts.legacy_runs) is kept
    assert cfg.bucket_layout.run(RUN).checkpoints == (f"checkpoints/{RUN}" if kept else f"checkpoints/dev/{RUN}")


def test_an_old_prefix_no_grant_of_the_stack_s_names_is_not_taken():
    """Another team's `checkpoints/<run>/` of the same run name, on a shared bucket: not this stack's."""
    cfg, facts = bucket_preflight.check(config("dev"), legacy_answers(True, False, grant=False).get)
    assert facts.legacy_runs == frozenset() and cfg.bucket_layout.run(RUN).checkpoints == f"checkpoints/dev/{RUN}"


def test_old_checkpoints_that_nothing_shows_to_be_the_stack_s_are_refused_not_restarted():
    get = legacy_answers(True, False)
    get.answers[a.bucket_paths(DEV_BUCKET)["iam"]] = (403, a.error(403, "no storage.buckets.getIamPolicy"))
    with pytest.raises(ConfigError) as err:
        bucket_preflight.check(config("dev"), get.get)
    assert err.value.problems == [
        f"runs[0].name: {RUN!r} has checkpoints in gs://{DEV_BUCKET}/checkpoints/{RUN}/ from before each stack's "
        "prefixes carried its name, and the bucket's IAM policy can't be read to tell whether they are this "
        f"stack's; the run would start again in checkpoints/dev/{RUN}/; allowed: `make migrate STACK=dev "
        f"RUN={RUN}` if they are (copies them, verified), or another name for the run if they are not"]


def test_the_program_mounts_grants_and_says_a_legacy_run_s_prefixes(monkeypatch):
    monkeypatch.setattr(bucket_preflight, "under_mocks", lambda: False)
    monkeypatch.setattr(bucket_preflight, "live_get", lambda: legacy_answers(True, False).get)
    warned = []
    monkeypatch.setattr(bucket_preflight.pulumi.log, "warn", lambda message, *args, **kwargs: warned.append(message))
    d = run_stack("dev")
    [jobset] = d.of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet")
    volumes = jobset.inputs["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["volumes"]
    options = {v["name"]: v["csi"]["volumeAttributes"]["mountOptions"] for v in volumes if "csi" in v}
    assert options["checkpoints"].endswith(f"only-dir=checkpoints/{RUN}")
    assert options["profiles"].endswith(f"only-dir=profiles/{RUN}") and options["data"].endswith("only-dir=datasets")
    [grant] = [g for g in d.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")
               if g.name == f"data-trainer-write-{RUN}"]
    assert f"/objects/checkpoints/{RUN}/" in grant.inputs["condition"]["expression"]
    # The old prefixes exist already; the run's export (new with `export:`) is in the stack's layout.
    folders = [f.inputs["name"] for f in d.of_type("gcp:storage/folder:Folder") if RUN in f.inputs["name"]]
    assert folders == [f"exports/dev/{RUN}/"]
    assert [w for w in warned if w.startswith(f"run {RUN} resumes from gs://{DEV_BUCKET}/checkpoints/{RUN}/")]
    assert f"`make migrate STACK=dev RUN={RUN}`" in warned[-1]


# --- another stack of the same name ---------------------------------------------------------------


def test_another_principal_writing_below_the_stack_s_prefixes_is_refused():
    other = a.principal("team-b", "dev-trainer")  # a stack named dev in another namespace (or repository)
    get = answers(DEV_BUCKET, a.bucket(DEV_BUCKET), a.policy(
        a.write_binding(DEV_BUCKET, DEV_TRAINER, [f"checkpoints/dev/{RUN}", f"profiles/dev/{RUN}"]),
        a.write_binding(DEV_BUCKET, other, [f"checkpoints/dev/{RUN}", f"profiles/dev/{RUN}"])))
    with pytest.raises(ConfigError) as err:
        bucket_preflight.check(config("dev"), get.get)
    [problem] = err.value.problems
    assert problem.startswith(f"stack: 'dev' names prefixes another principal of gs://{DEV_BUCKET} may write below "
                              f"({other}: role roles/storage.objectUser on checkpoints/dev/{RUN}/)")
    assert problem.endswith("allowed: a stack name no other stack on this bucket uses (`pulumi stack rename <name>`), "
                            "or a bucket of the stack's own (bucketName)")


# --- folders ------------------------------------------------------------------------------------


def test_folders_that_exist_are_adopted_and_the_others_created_each_after_its_parent(monkeypatch):
    existing_folders = ["checkpoints/", "datasets/", "datasets/dev/", "datasets/dev/tinystories/"]
    listing = {f"b/{DEV_BUCKET}/folders/{a.q(top)}": (200, a.folder(top)) for top in ("checkpoints/", "datasets/")}
    listing[f"b/{DEV_BUCKET}/folders?prefix={a.q('datasets/dev/')}"] = (200, a.folders("datasets/dev/",
                                                                                         "datasets/dev/tinystories/"))
    get = answers(DEV_BUCKET, a.bucket(DEV_BUCKET), a.policy(), **listing)
    _, facts = bucket_preflight.check(config("dev"), get.get)
    assert facts.folders == frozenset(existing_folders)
    monkeypatch.setattr(bucket_preflight, "under_mocks", lambda: False)
    monkeypatch.setattr(bucket_preflight, "live_get", lambda: get.get)
    folders = {f.inputs["name"]: f for f in run_stack("dev").of_type("gcp:storage/folder:Folder")}
    assert {n for n, f in folders.items() if f.import_id} == set(existing_folders)
    assert folders["datasets/dev/"].import_id == f"{DEV_BUCKET}/datasets/dev/"
    assert all(f.retain_on_delete for f in folders.values())
    assert folders["checkpoints/dev/"].urn in folders[f"checkpoints/dev/{RUN}/"].dependencies


def test_missing_folders_of_a_bucket_whose_grants_are_the_platform_team_s_are_named_with_the_command():
    get = answers(TEAM_BUCKET, a.bucket(TEAM_BUCKET), a.policy())
    _, facts = bucket_preflight.check(existing(grants=False), get.get)
    [warning] = facts.warnings
    assert warning.endswith(
        f"`gcloud storage folders create --recursive gs://{TEAM_BUCKET}/datasets/existing-dev/tinystories/ "
        f"gs://{TEAM_BUCKET}/checkpoints/existing-dev/{RUN}/ gs://{TEAM_BUCKET}/profiles/existing-dev/{RUN}/`")


def test_the_location_is_judged_against_an_existing_cluster_s_own_location():
    cluster = {"name": "team-cluster", "location": "europe-west4-b", "controllers": "install"}
    cfg = config("existing-dev", existingCluster=cluster)
    bucket = a.bucket(TEAM_BUCKET, location="EUROPE-WEST4", hierarchical=False)
    _, facts = bucket_preflight.check(cfg, answers(TEAM_BUCKET, bucket, a.policy()).get)
    assert facts.warnings == []  # the cluster's zone is in the bucket's region, whatever gcp:region says
    _, facts = bucket_preflight.check(cfg, answers(TEAM_BUCKET, a.bucket(TEAM_BUCKET, hierarchical=False),
                                                   a.policy()).get)
    assert [w.split(" is not")[0] for w in facts.warnings] == [
        f"location: 'US-EAST5' (region) of gs://{TEAM_BUCKET}"]
    assert "the cluster's region europe-west4" in facts.warnings[0]


def test_an_api_that_does_not_answer_is_not_checked_and_said_so(monkeypatch):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9")  # nothing listens there
    cfg, facts = bucket_preflight.check(existing(), bucket_preflight.live_get())
    [warning] = facts.warnings
    assert warning.startswith(f"gs://{TEAM_BUCKET}: its settings, the runs' prefixes and folders not checked: "
                              "no answer: ConnectionError")
    assert facts.problems == [] and cfg.bucket_layout.legacy_runs == frozenset()
