"""The stack's bucket through a real Cloud Storage API server on 127.0.0.1 (fake-gcs-server, e2e/tools/fake-gcs) and
the real clients: the program's reads before it declares anything (components/bucket_preflight.py, the JSON API
over HTTP) and `make migrate` (tools/migrate, the google-cloud-storage client).

A run deployed before the bucket's prefixes carried the stack has its checkpoints in `checkpoints/<run>/`. The
emulator serves no IAM policy (a 404: it has no such endpoint), so nothing shows whose they are: the program
refuses rather than start the run again elsewhere, naming `make migrate`. The migration copies them, each object's
CRC32C and MD5 from the server's metadata verified; run again, it copies nothing; an object the run wrote in the
new place since is left alone; a lost copy is copied again; the source is deleted only when asked. After it the
program moves the run to its new prefixes. The emulator reports no `iamConfiguration` (the API leaves a setting
out when it is off), so an existing bucket whose grants the stack declares is refused, naming the setting.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from components import bucket_preflight
from e2e.harness import fake_gcs
from e2e.harness.processes import Supervisor
from e2e.harness.tools import ROOT, tools
from stack.problems import ConfigError
from stack.reader import file_values, model_values, validate

RUN = "gemma3-single-host"
BUCKET = "my-project-id-dev-finetune"
TEAM_BUCKET = "my-project-id-team-finetune"  # Pulumi.existing-dev.yaml's: the platform team's
OLD, NEW = f"checkpoints/{RUN}", f"checkpoints/dev/{RUN}"


@pytest.fixture(scope="module")
def gcs(state_root) -> Iterator[fake_gcs.FakeGcs]:
    supervisor = Supervisor(state_root / "bucket-reads")
    supervisor.install_handlers()
    try:
        server = fake_gcs.start(supervisor, tools(("fake-gcs",)), location="US-CENTRAL1")
        server.create_bucket(BUCKET)
        server.create_bucket(TEAM_BUCKET)
        for step in (10, 20):
            server.upload(BUCKET, f"{OLD}/{step}/state", bytes([step]) * (4096 * step))
        server.upload(BUCKET, f"{OLD}/progress.json", b'{"schema": 1, "checkpoint_step": 20}')
        server.upload(BUCKET, f"profiles/{RUN}/events", b"tensorboard")
        yield server
    finally:
        supervisor.stop()


@pytest.fixture()
def env(gcs, monkeypatch) -> dict[str, str]:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs.url)
    return {"STORAGE_EMULATOR_HOST": gcs.url, "PATH": "/usr/bin:/bin", "HOME": str(ROOT)}


def config(stack: str, **overrides):
    values = file_values(stack, ROOT)
    values.update({f"gke-finetune:{k}": v for k, v in overrides.items()})
    return validate(model_values(values, stack))


def migrate(env, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tools.migrate", "--stack", "dev", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def checksums(gcs, prefix: str) -> dict[str, tuple[str, str]]:
    from google.cloud import storage  # the real client, as the migration reads them

    client = storage.Client(project="e2e")
    return {b.name.removeprefix(prefix): (b.crc32c, b.md5_hash) for b in client.list_blobs(BUCKET, prefix=f"{prefix}/")}


def test_a_run_deployed_before_is_refused_then_migrated_verified_and_moved(gcs, env):
    with pytest.raises(ConfigError) as err:
        bucket_preflight.check(config("dev"), bucket_preflight.live_get())
    [problem] = err.value.problems
    assert problem.startswith(f"runs[0].name: {RUN!r} has checkpoints in gs://{BUCKET}/{OLD}/ from before")
    assert f"`make migrate STACK=dev RUN={RUN}`" in problem

    done = migrate(env, "--run", RUN)
    assert done.returncode == 0, done.stderr
    assert "migrate: 4 copied and verified, 0 there already and verified" in done.stdout
    assert "100.0%" in done.stderr and "4 of 4 objects" in done.stderr  # the progress bar
    assert checksums(gcs, NEW) == checksums(gcs, OLD) and len(checksums(gcs, NEW)) == 3
    assert checksums(gcs, f"profiles/dev/{RUN}") == checksums(gcs, f"profiles/{RUN}")

    cfg, facts = bucket_preflight.check(config("dev"), bucket_preflight.live_get())
    assert facts.legacy_runs == frozenset() and cfg.bucket_layout.run(RUN).checkpoints == NEW
    assert any(w.startswith("location: 'US-CENTRAL1' (region)") for w in facts.warnings) is False  # own bucket

    again = migrate(env, "--run", RUN)
    assert again.returncode == 0 and "0 copied and verified, 4 there already and verified" in again.stdout


def test_the_migration_resumes_and_never_overwrites_what_the_run_wrote_since(gcs, env):
    migrate(env, "--run", RUN)
    gcs.upload(BUCKET, f"{NEW}/progress.json", b'{"schema": 1, "checkpoint_step": 30}')  # the run, moved, wrote
    from google.cloud import storage

    storage.Client(project="e2e").bucket(BUCKET).blob(f"{NEW}/10/state").delete()  # a copy lost
    done = migrate(env, "--run", RUN, "--delete-source")
    assert done.returncode == 1
    assert "migrate: 1 copied and verified, 2 there already and verified" in done.stdout
    assert f"left alone, there with other content: {NEW}/progress.json" in done.stdout
    assert "no source object deleted: not every copy is verified" in done.stdout
    assert checksums(gcs, NEW)["/10/state"] == checksums(gcs, OLD)["/10/state"]
    assert set(checksums(gcs, OLD)) == {"/10/state", "/20/state", "/progress.json"}  # nothing deleted


def test_an_existing_bucket_is_read_as_the_api_answers(gcs, env):
    cluster = {"context": "gke_my-project-id_us-east5_team-cluster", "controllers": "install", "bucketGrants": True}
    mine = config("existing-dev", existingCluster=cluster, projectNumber="123456789012")
    with pytest.raises(ConfigError) as err:
        bucket_preflight.check(mine, bucket_preflight.live_get())
    assert [p.split(" has ")[0] for p in err.value.problems] == [f"bucketName: {TEAM_BUCKET!r}"]
    assert "uniform bucket-level access off (iamConfiguration.uniformBucketLevelAccess.enabled: false)" in str(err.value)
    theirs = config("existing-dev")  # the platform team's grants: warnings only
    _, facts = bucket_preflight.check(theirs, bucket_preflight.live_get())
    assert [w.split(":")[0] for w in facts.warnings[:3]] == [
        "iamConfiguration.uniformBucketLevelAccess.enabled", "iamConfiguration.publicAccessPrevention", "location"]
    assert f"location: 'US-CENTRAL1' (region) of gs://{TEAM_BUCKET} is not the cluster's region us-east5" \
        in facts.warnings[2]
    # The same run name's old checkpoints in another bucket are no concern of this one.
    assert facts.legacy_runs == frozenset()
