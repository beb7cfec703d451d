"""PHASEALLOC=1 reaches every Ray worker, and roles give workers their own settings.

Ray actors are processes the raylet starts, with the raylet's environment (not the driver's) plus
their runtime_env. Two ways users start a cluster, both on 2 simulated GPUs that Ray is told about
(num_gpus: Ray's detection looks for NVIDIA's tools, not the simulator):
- ray.init() in a job started with phasealloc-run: the local cluster's raylet inherits the driver's
  environment, so every worker does;
- `ray start --head` started separately (here on the simulated GPU, without phasealloc: --native),
  and a job that passes PHASEALLOC=1 in its runtime_env (docs/frameworks.md's recipe); then the same cluster
  runs the job again through `ray job submit --runtime-env-json '{"env_vars": {"PHASEALLOC": "1"}}'`
  (the other README recipe: Ray's job server, the dashboard, sets the runtime_env).
Each actor (num_gpus=1) imports torch, computes on its GPU and reports torch's allocator backend and
phasealloc's effective configuration; the job (ray_workers_job.py) gives each actor PHASEALLOC_ROLE in
its own runtime_env, and a PHASEALLOC_CONF with a roles section gives the rollout actor its own policy.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from torch_harness import bridges, child_env, free_port, gpu_skip_reason, launcher, on_simulator

try:
    import pytest
except ImportError:
    pytest = None

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "ray_workers_job.py")
RAY = os.path.join(os.path.dirname(sys.executable), "ray")
ROLES_CONF = "roles:[rollout:[policy:[phasealloc:release:all]]]"


def ray_env():
    """A child's environment for a Ray cluster of its own: 2 simulated GPUs, Ray's files in a short
    folder of its own (RAY_TMPDIR: its socket paths must stay short), no token authentication (the
    cluster and its driver are the same user's processes on one machine)."""
    env = child_env("", "c10")
    if on_simulator():
        env["SIMCUDA_GPU"] = "count:2,quiet:1"
    env["RAY_TMPDIR"] = tempfile.mkdtemp(prefix="pa-ray-", dir="/tmp")
    env["RAY_AUTH_MODE"] = "disabled"
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    return env


def check_workers(out_path, roles):
    result = json.loads(open(out_path).read())
    workers = result["workers"]
    assert len(workers) == len(roles), result
    assert len({w["pid"] for w in workers} | {result["driver_pid"]}) == len(roles) + 1, result
    assert sorted(w["gpu_ids"][0] for w in workers) == [str(i) for i in range(len(roles))], result
    # Each actor sees the one GPU Ray gave it (CUDA_VISIBLE_DEVICES), as its device 0: two GPUs.
    assert all(w["device_count"] == 1 and w["cuda_visible_devices"] == w["gpu_ids"][0] for w in workers), result
    assert len({w["uuid"] for w in workers}) == len(roles), result
    for worker, role in zip(workers, roles):
        assert worker["backend"] == "phasealloc", worker
        assert worker["role"] == role and worker["config"].endswith(",role:" + role), worker
    return {w["role"]: w for w in workers}


if pytest is not None and __name__ != "__main__":
    _REASON = gpu_skip_reason()
    pytestmark = [pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]

    @pytest.fixture
    def needs_ray():
        if not os.path.exists(RAY):
            pytest.skip("Ray is not installed (tests/requirements.txt has it)")
        if "c10" not in bridges():
            pytest.skip("the c10 bridge was not built")

    def test_ray_init_cluster_workers_inherit_phasealloc_and_take_their_role(needs_ray, tmp_path):
        env = ray_env()
        env["PHASEALLOC_CONF"] = ROLES_CONF
        out = tmp_path / "workers.json"
        try:
            job = subprocess.run(launcher() + ["--", sys.executable, JOB, "local", str(out)], env=env,
                                 capture_output=True, text=True, timeout=600)
        finally:
            shutil.rmtree(env["RAY_TMPDIR"], ignore_errors=True)
        assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-6000:]
        workers = check_workers(out, ["trainer", "rollout"])
        assert "release:all" in workers["rollout"]["config"], workers
        assert "release:adaptive" in workers["trainer"]["config"], workers

    # The README's `ray start` + `ray job submit` recipe: a head of its own and the job's dashboard
    # (about 100 s on 2 cores), in the weekly tier (tests/harness/tiers.py); ray.init's cluster above
    # is the per-submission check of Ray's workers.
    @pytest.mark.weekly
    def test_a_separately_started_cluster_gets_phasealloc_from_the_runtime_env(needs_ray, tmp_path):
        env = ray_env()
        port = free_port()
        dashboard_port = free_port()
        head_command = launcher() + ["--native", "--", RAY, "start", "--head", "--block", "--port=%d" % port,
                                     "--num-gpus=2", "--num-cpus=2", "--include-dashboard=true",
                                     "--dashboard-host=127.0.0.1", "--dashboard-port=%d" % dashboard_port,
                                     "--dashboard-agent-listen-port=%d" % free_port(), "--disable-usage-stats"]
        head_log = open(tmp_path / "head.log", "w")
        head = subprocess.Popen(head_command, env=env, stdout=head_log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            address = None
            deadline = time.time() + 300
            while time.time() < deadline and head.poll() is None and address is None:
                time.sleep(1)
                for line in open(tmp_path / "head.log"):
                    if "ray start --address='" in line:
                        address = line.split("ray start --address='")[1].split("'")[0]
            assert address, "the head did not start: " + open(tmp_path / "head.log").read()[-4000:]
            out = tmp_path / "workers.json"
            driver_env = dict(env)  # the driver itself runs without phasealloc
            driver_env.pop("PHASEALLOC", None)
            job = subprocess.run([sys.executable, JOB, address, str(out)], env=driver_env, capture_output=True,
                                 text=True, timeout=600)
            assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-6000:]
            check_workers(out, ["trainer", "rollout"])

            # `ray job submit`: the runtime_env comes with the submission, the entrypoint runs on the cluster.
            env_vars = {"PHASEALLOC": "1"}
            if env.get("PHASEALLOC_LIBRARY"):
                env_vars["PHASEALLOC_LIBRARY"] = env["PHASEALLOC_LIBRARY"]
            submitted = tmp_path / "submitted.json"
            job = subprocess.run([RAY, "job", "submit", "--address", "http://127.0.0.1:%d" % dashboard_port,
                                  "--runtime-env-json", json.dumps({"env_vars": env_vars}), "--",
                                  sys.executable, JOB, "submitted", str(submitted)],
                                 env=driver_env, capture_output=True, text=True, timeout=600)
            assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-6000:]
            check_workers(submitted, ["trainer", "rollout"])
        finally:
            try:
                os.killpg(head.pid, signal.SIGTERM)  # the head and the processes it started: our session
            except ProcessLookupError:  # the head has failed already (its log is in the assertion)
                pass
            try:
                head.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(head.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            head.wait()
            head_log.close()
            shutil.rmtree(env["RAY_TMPDIR"], ignore_errors=True)
