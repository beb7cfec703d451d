"""PHASEALLOC_CONF: the grammar, every key, and the errors (each in a fresh process: read once)."""

import pytest

from conftest import CTYPES_PRELUDE, run_python

SHOW_CONFIG = CTYPES_PRELUDE + """
c = lib.phasealloc_config()
print("CONFIG " + (c.decode() if c is not None else "NULL"))
print("ERROR " + err())
"""


def config_of(conf):
    out = run_python(SHOW_CONFIG, conf=conf)
    assert out.returncode == 0, out.stderr
    lines = {}
    for line in out.stdout.splitlines():
        key, _, value = line.partition(" ")
        lines[key] = value
    return lines["CONFIG"], lines["ERROR"]


def test_unknown_key_is_named_and_the_valid_keys_listed(lib):
    config, error = config_of("device:model,colour:red")
    assert config == "NULL"
    assert "unknown key 'colour'" in error
    for key in ("device", "policy", "strict", "trace", "model_capacity", "model_virtual_memory", "vmm_page",
                "check_invariants", "host_budget"):
        assert key in error


@pytest.mark.parametrize("conf, names", [
    ("device:tpu", ["'device'", "cuda_vmm", "cuda_runtime", "model"]),
    ("device:model,strict:maybe", ["'strict'", "boolean"]),
    ("device:model,model_capacity:lots", ["'model_capacity'", "byte size"]),
    ("device:model,host_budget:lots", ["'host_budget'", "byte size", "\"lots\""]),
    ("device:model,host_budget:-1GiB", ["'host_budget'", "byte size"]),
    ("device:model,offload:sometimes", ["'offload'", "not an offload mode", "none, pressure or auto"]),
    ("device:model,policy:nope", ["'policy'", "unknown policy 'nope'", "basic"]),
    ("device:model,policy:[basic:small_limit:1MiB,colour:red]", ["'policy'", "unknown key 'colour'"]),
    ("device:model,device:model", ["given twice"]),
    ("device", ["no ':'"]),
    ("device:model,policy:[phasealloc:memory_fraction:nan]", ["'policy'", "'memory_fraction'", "not a finite number"]),
    ("device:model,policy:[phasealloc:memory_fraction:-inf]", ["'policy'", "'memory_fraction'", "not a finite number"]),
    ("device:model,policy:[phasealloc:memory_fraction:0]", ["'policy'", "'memory_fraction'", "not in (0, 1]"]),
])
def test_bad_values_name_the_key(lib, conf, names):
    config, error = config_of(conf)
    assert config == "NULL"
    for name in names:
        assert name in error, (name, error)


def test_bracketed_policy_spec_keeps_its_commas(lib):
    config, _ = config_of("device:model,policy:[basic:small_limit:64KiB,large_round:4MiB],model_capacity:1GiB")
    assert "policy:[basic:small_limit:65536," in config and "large_round:4194304" in config
    assert "model_capacity:1073741824" in config


def test_policy_spec_without_commas_needs_no_brackets(lib):
    config, _ = config_of("device:model,policy:basic:expandable_large:true")
    assert "expandable_large:true" in config


def test_defaults_and_round_trip(lib):
    config, error = config_of("")
    assert error == ""
    assert config.startswith("device:auto,policy:")
    assert "strict:false" in config
    again, _ = config_of(config)  # pasted back unchanged
    assert again == config
    with_trace, _ = config_of("device:model,trace:[/tmp/a,b/t.%p.txt]")
    assert with_trace.endswith("trace:[/tmp/a,b/t.%p.txt]")
    assert config_of(with_trace)[0] == with_trace


def test_the_configured_policy_and_capacity_are_used(lib):
    out = run_python(CTYPES_PRELUDE + """
p = lib.phasealloc_try_malloc(100 * 1024, 0, None)  # above small_limit: the large pool
s = stats(0)
print(s["allocated_bytes.large_pool.current"], s["phasealloc"]["capacity_bytes"])
""", conf="device:model,policy:[basic:small_limit:64KiB,large_round:4MiB],model_capacity:1GiB")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(100 * 1024), str(1 << 30)]


def test_configure_before_first_use_wins_over_the_environment(lib):
    out = run_python(CTYPES_PRELUDE + """
assert lib.phasealloc_configure(b"device:model,colour:red") == -1
print(err())
assert lib.phasealloc_configure(b"device:model,model_capacity:2GiB") == 0
print(lib.phasealloc_config().decode())
""", conf="device:model,model_capacity:8GiB")
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.strip().splitlines()
    assert "unknown key 'colour'" in first
    assert "model_capacity:%d" % (2 << 30) in second


def test_a_bad_configuration_fails_allocations_with_its_error_and_does_not_crash(lib):
    out = run_python(CTYPES_PRELUDE + """
assert lib.phasealloc_try_malloc(1024, 0, None) is None
print(err())
assert lib.phasealloc_phase_begin(b"generation") == 0  # phases work without engines
print(lib.phasealloc_stats_json(0).decode()[:1])
""", conf="device:model,colour:red")
    assert out.returncode == 0, out.stderr
    assert "no engine for device 0" in out.stdout and "unknown key 'colour'" in out.stdout


def test_a_nan_memory_fraction_fails_try_malloc_with_its_key_and_the_process_lives(lib):
    # The NaN used to reach the engine, which aborted the host process.
    out = run_python(CTYPES_PRELUDE + """
assert lib.phasealloc_try_malloc(70 << 30, 0, None) is None
print(err())
""", conf="device:model,policy:[phasealloc:memory_fraction:nan]")
    assert out.returncode == 0, out.stderr
    assert "bad value for 'memory_fraction': \"nan\" is not a finite number" in out.stdout


def test_a_memory_fraction_below_one_byte_of_the_device_is_a_limit_not_no_limit(lib):
    # 1e-11 of a 64 GiB device rounded to 0 = "no limit" and a 60 GiB allocation succeeded.
    out = run_python(CTYPES_PRELUDE + """
assert lib.phasealloc_try_malloc(60 << 30, 0, None) is None
print(err().splitlines()[0])
lib.phasealloc_clear_last_error()
lib.phasealloc_memory_fraction(ctypes.c_double(1e-12), 0)  # PyTorch accepts it: 0 bytes allowed
print(err() == "")
assert lib.phasealloc_try_malloc(512, 0, None) is None
print(err().splitlines()[0])
""", conf="device:model,model_capacity:64GiB,model_virtual_memory:true,policy:[phasealloc:memory_fraction:1e-11]")
    assert out.returncode == 0, out.stderr
    first, second, third = out.stdout.strip().splitlines()[:3]
    assert "out of memory" in first and "limit 1 B" in first
    assert second == "True"
    assert "out of memory" in third and "limit 1 B" in third


def test_cuda_devices_without_a_gpu_fail_with_a_clear_message(lib):
    out = run_python(CTYPES_PRELUDE + """
for conf_device in ("auto",):
    assert lib.phasealloc_try_malloc(1024, 0, None) is None
    print(err())
""", conf="device:auto", timeout=120)
    assert out.returncode == 0, out.stderr
    message = out.stdout.strip()
    assert "no engine for device 0" in message
    # A build with the CUDA devices tried both; one without them says it has none.
    assert ("cuda_vmm" in message and "cuda_runtime" in message) or "needs the CUDA devices" in message


# --- roles: one PHASEALLOC_CONF, a section per process kind ------------------------------------

ROLES = ("device:model,model_capacity:2GiB,policy:[phasealloc:release:adaptive],"
         "roles:[rollout:[policy:[phasealloc:release:all],model_capacity:1GiB],trainer:[strict:true]]")


def role_config(conf, role=None):
    out = run_python(SHOW_CONFIG, conf=conf, extra={"PHASEALLOC_ROLE": role} if role is not None else None)
    assert out.returncode == 0, out.stderr
    lines = dict(line.partition(" ")[::2] for line in out.stdout.splitlines())
    return lines["CONFIG"], lines["ERROR"]


def test_a_roles_section_replaces_the_top_level_keys_for_that_role_only(lib):
    rollout, _ = role_config(ROLES, "rollout")
    assert "release:all" in rollout and "model_capacity:1073741824" in rollout and "strict:false" in rollout
    assert rollout.endswith(",role:rollout"), rollout
    trainer, _ = role_config(ROLES, "trainer")
    assert "release:adaptive" in trainer and "model_capacity:2147483648" in trainer and "strict:true" in trainer
    assert trainer.endswith(",role:trainer"), trainer
    none, _ = role_config(ROLES)
    assert "release:adaptive" in none and "strict:false" in none and "role:" not in none and "roles" not in none
    other, _ = role_config(ROLES, "reward")  # a role without a section: the top level, named
    assert "release:adaptive" in other and other.endswith(",role:reward"), other


def test_the_effective_configuration_of_a_role_pastes_back_to_the_same(lib):
    rollout, _ = role_config(ROLES, "rollout")
    again, _ = role_config(rollout)  # role:rollout in the text, no PHASEALLOC_ROLE
    assert again == rollout


def test_the_role_key_wins_over_the_environment(lib):
    config, _ = role_config(ROLES + ",role:trainer", "rollout")
    assert "strict:true" in config and config.endswith(",role:trainer"), config


@pytest.mark.parametrize("conf, role, names", [
    (ROLES.replace("strict:true", "stritc:true"), "rollout", ["roles section 'trainer'", "unknown key 'stritc'"]),
    (ROLES.replace("strict:true", "role:x"), None, ["roles section 'trainer'", "'role' cannot be set per role"]),
    ("device:model,roles:[a b:[strict:true]]", None, ["'roles'", "not a role name"]),
    ("device:model,roles:[rollout:[model_capacity:lots]]", "trainer", ["roles section 'rollout'", "'model_capacity'"]),
    ("device:model", "roll/out", ["'role'", "roll/out", "letters, digits"]),
])
def test_bad_roles_name_what_is_wrong(lib, conf, role, names):
    config, error = role_config(conf, role)
    assert config == "NULL"
    for name in names:
        assert name in error, (name, error)


def test_unknown_key_lists_role_and_roles(lib):
    _, error = config_of("device:model,colour:red")
    assert "role" in error and "roles" in error
