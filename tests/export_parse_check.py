#!/usr/bin/env python3
"""Parses what `foldplan ranks --format F` prints for the trainer formats and
checks every degree against the rank map (`--format rankmap`).

    export_parse_check.py FOLDPLAN_BIN

olmo-core (by tests/trainer_exports/olmo_core.py), jax and torch are parsed
with `ast` (never executed: the trainers need not be installed), torchtitan
and torchtitan-toml by tests/trainer_exports/torchtitan.py (`ast`,
`tomllib`), maxtext with `yaml` (by tests/trainer_exports/maxtext.py), the
megatron arguments with `shlex` (as a shell would split them). For torch the
groups along each DeviceMesh dimension must equal the rank map's. For jax and
maxtext the mesh's axis product must equal the world and the groups along
each mesh axis (devices in rank order) must equal the rank map's groups; the
ICI x DCN split must put whole NVLink domains of the placement in each
granule. A format a case expects to refuse must exit 1 naming itself.
"""
import ast
import itertools
import shlex
import json
import math
import subprocess
import sys
import pathlib
import tomllib

import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "trainer_exports"))
from common import load_checker  # noqa: E402

FOLDPLAN = sys.argv[1]

# (arguments, formats expected to export; every other trainer format must refuse).
# torch builds its meshes from the map's own rank arrays, so it exports every
# layout; Megatron has no gpipe or zb-h1 schedule.
CASES = [
    ("--world-size 16 --layout tp=2,cp=2,pp=2,ep=4,etp=1", {"jax", "torch", "megatron"}),
    ("--world-size 16 --layout tp=1,cp=2,pp=2,ep=4,etp=1,cp_style=ring,recompute=full",
     {"jax", "torch", "megatron"}),
    ("--world-size 16 --layout tp=1,cp=1,pp=2,ep=4,etp=1,recompute=selective,fsdp=true",
     {"olmo-core", "torchtitan", "torchtitan-toml", "jax", "maxtext", "torch", "megatron"}),
    ("--world-size 16 --layout tp=2,cp=1,pp=1,ep=1,etp=2,recompute=moe_act+layernorm",
     {"olmo-core", "jax", "torch", "megatron"}),
    ("--world-size 16 --layout tp=2,cp=1,pp=2,ep=2,etp=2,schedule=gpipe", {"jax", "torch"}),
    ("--world-size 16 --layout tp=2,cp=1,pp=2,ep=1,etp=2,order=tp-cp-ep-pp-dp",
     {"jax", "maxtext", "torch", "megatron"}),
    ("--world-size 12 --layout tp=2,cp=1,pp=1,ep=3,etp=1", {"torch", "megatron"}),
    ("--cluster h100-dgx-16n --gpus 32 --model mixtral-8x7b --layout tp=1,cp=1,pp=4,vpp=2,ep=8,etp=1,fsdp=true",
     {"olmo-core", "torchtitan", "torchtitan-toml", "jax", "torch", "megatron"}),
    ("--cluster h100-dgx-16n --gpus 32 --model mixtral-8x7b --layout tp=2,cp=1,pp=2,ep=8,etp=1,schedule=zb-h1",
     {"jax", "torch"}),
    ("--cluster gb200-nvl72-4r --gpus 256 --model qwen3-30b-a3b "
     "--layout tp=1,cp=1,pp=1,ep=64,etp=1,placement=packed",
     {"jax", "maxtext", "torch", "megatron"}),
    # OLMo-core's HSDP with 2 replicas of shard ep 4; MaxText fsdp 2 x expert 4.
    ("--cluster h100-dgx-16n --gpus 16 --model mixtral-8x7b --layout tp=1,cp=1,pp=2,ep=4,etp=1,fsdp=true",
     {"olmo-core", "torchtitan", "torchtitan-toml", "jax", "maxtext", "torch", "megatron"}),
    # A dense model with tp and ring CP: OLMo-core's tp, MaxText's context_parallel_strategy ring.
    ("--cluster h100-dgx-16n --gpus 16 --model llama3-70b --layout tp=2,cp=2,pp=2,ep=1,etp=2,cp_style=ring,fsdp=true",
     {"olmo-core", "torchtitan", "torchtitan-toml", "jax", "maxtext", "torch", "megatron"}),
    # DeepSeek-V3's dense and MoE layers are two kinds: MaxText pipelines one.
    ("--cluster h100-dgx-128n --gpus 256 --model deepseek-v3 --layout tp=1,cp=1,pp=8,ep=32,etp=1,fsdp=true",
     {"olmo-core", "torchtitan", "torchtitan-toml", "jax", "torch", "megatron"}),
]
FORMATS = ["olmo-core", "torchtitan", "torchtitan-toml", "jax", "maxtext", "torch", "megatron"]
failures = []


def fail(case, fmt, msg):
    failures.append(f"{case} --format {fmt}: {msg}")


def run(args, fmt):
    # --force: the groups are checked, whether or not the layout fits in memory.
    p = subprocess.run([FOLDPLAN, "ranks", *args.split(), "--format", fmt, "--force"], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def layout_flags(args):
    text = args.split("--layout ")[1].split()[0]
    return dict(kv.split("=") for kv in text.split(","))


def mesh_groups(shape, axes):
    """Groups of ranks (row-major index of a mesh of `shape`) varying along `axes`."""
    groups = {}
    for rank, coord in enumerate(itertools.product(*[range(n) for n in shape])):
        key = tuple(c for k, c in enumerate(coord) if k not in axes)
        groups.setdefault(key, []).append(rank)
    return sorted(sorted(g) for g in groups.values())


def same_groups(ours, rankmap_groups):
    return ours == sorted(sorted(g) for g in rankmap_groups)


def check_granules(case, fmt, rm, ici):
    """Each block of prod(ici) consecutive ranks is one NVLink domain, distinct per block."""
    size = math.prod(ici)
    domains = rm["placement"]["domain"]
    blocks = [set(domains[i:i + size]) for i in range(0, len(domains), size)]
    if any(len(b) != 1 for b in blocks) or len({next(iter(b)) for b in blocks}) != len(blocks):
        fail(case, fmt, f"ICI blocks of {size} ranks do not match the NVLink domains {domains}")


def calls(tree):
    """name -> ast.Call (or None) for every `name = ...` at module level."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = node.value
    return out


def kwarg(call, name):
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


# OLMo-core's checker (tests/trainer_exports/olmo_core.py: names in the key
# list, degrees as OLMo-core checks them, the groups of its world mesh),
# loaded under a name that does not shadow OLMo-core itself.
oc_export_check = load_checker("olmo_core")


def check_olmo(case, rm, text):
    for error in oc_export_check.check(text, rm, "olmo-core"):
        fail(case, "olmo-core", error)


# torchtitan's checker (tests/trainer_exports/torchtitan.py), loaded under a
# name that does not shadow torchtitan itself.
tt_export_check = load_checker("torchtitan")


def check_torchtitan(case, rm, text, fmt="torchtitan"):
    for error in tt_export_check.check(text, rm, fmt):
        fail(case, fmt, error)


def check_jax(case, rm, text):
    tree = ast.parse(text)
    v = calls(tree)
    lit = lambda k: ast.literal_eval(v[k])
    names, shape = lit("axis_names"), lit("mesh_shape")
    d, w = rm["degrees"], rm["world_size"]
    if math.prod(shape) != w or len(names) != len(shape):
        fail(case, "jax", f"mesh {names} {shape} is not the world {w}")
        return
    if lit("gpu_of_rank") != rm["placement"]["gpu"]:
        fail(case, "jax", "gpu_of_rank differs from the rank map's placement")
    if "ici_shape" in v:
        ici, dcn = lit("ici_shape"), lit("dcn_shape")
        if [a * b for a, b in zip(ici, dcn)] != list(shape):
            fail(case, "jax", f"ici {ici} x dcn {dcn} != mesh {shape}")
        check_granules(case, "jax", rm, ici)
        if "create_hybrid_device_mesh" not in text:
            fail(case, "jax", "has ici/dcn shapes but no create_hybrid_device_mesh")

    def axes_of(var):
        node = v[var]
        val = ast.literal_eval(node)
        val = () if val is None else (val,) if isinstance(val, str) else val
        return [names.index(a) for a in val]

    kinds = {"pp": ["PP"], "dp": ["DP"], "cp": ["CP"], "tp": ["TP"], "dp_cp": ["DP", "CP"],
             "edp": ["EDP"], "ep": ["EP"], "etp": ["ETP"]}
    for kind, vars_ in kinds.items():
        axes = sum((axes_of(x) for x in vars_), [])
        size = math.prod(shape[a] for a in axes)
        degree = math.prod(d[x.lower()] for x in vars_)
        if size != degree:
            fail(case, "jax", f"{'x'.join(vars_)} axes hold {size} ranks, degree {degree}")
        if kind in rm["groups"] and not same_groups(mesh_groups(shape, axes), rm["groups"][kind]):
            fail(case, "jax", f"{kind} groups of the mesh differ from the rank map's")
    for spec in ["qkv_proj", "out_proj", "expert_w_in", "expert_w_out", "activations"]:
        if not (isinstance(v.get(spec), ast.Call) and ast.unparse(v[spec].func) == "P"):
            fail(case, "jax", f"no PartitionSpec {spec}")


# MaxText's checker (tests/trainer_exports/maxtext.py: keys in the key list,
# the mesh's degrees, groups and ICI x DCN split, the pipeline, CP and batch
# settings), loaded under a name that does not shadow MaxText itself.
mt_export_check = load_checker("maxtext")


def check_maxtext(case, rm, text):
    for error in mt_export_check.check(text, rm, "maxtext"):
        fail(case, "maxtext", error)


def literal_mesh(tree, ranks_var, names_var):
    """(rank list, shape, dim names) of `ranks_var = torch.tensor([...]).reshape(...)` and
    `names_var = DeviceMesh("cuda", ranks_var, mesh_dim_names=(...))`."""
    c = calls(tree)
    reshape = c[ranks_var]  # torch.tensor([...]).reshape(a, b, c, d)
    ranks = ast.literal_eval(reshape.func.value.args[0])
    shape = [ast.literal_eval(a) for a in reshape.args]
    names = ast.literal_eval(kwarg(c[names_var], "mesh_dim_names"))
    return ranks, shape, names


def check_torch(case, rm, text):
    tree = ast.parse(text)
    views = [("dense_ranks", "dense_mesh", {"pp": "pp", "dp": "dp", "cp": "cp", "tp": "tp"}),
             ("expert_ranks", "expert_mesh", {"pp": "pp", "edp": "edp", "ep": "ep", "etp": "etp"})]
    for ranks_var, mesh_var, kinds in views:
        ranks, shape, names = literal_mesh(tree, ranks_var, mesh_var)
        if math.prod(shape) != rm["world_size"] or sorted(ranks) != list(range(rm["world_size"])):
            fail(case, "torch", f"{mesh_var}: shape {shape} does not hold every rank once")
            continue
        for axis, name in enumerate(names):
            kind = kinds[name]
            groups = [[ranks[i] for i in g] for g in mesh_groups(shape, [axis])]
            if not same_groups(sorted(sorted(g) for g in groups), rm["groups"][kind]):
                fail(case, "torch", f"{mesh_var}[{name!r}] groups differ from the rank map's {kind} groups")


# Megatron's checker (tests/trainer_exports/megatron.py: flags in the key
# list, degrees, and the groups Megatron's RankGenerator builds from the
# flags), loaded under a name that does not shadow Megatron itself.
mg_export_check = load_checker("megatron")


def check_megatron(case, rm, text):
    for error in mg_export_check.check(text, rm, "megatron"):
        fail(case, "megatron", error)


CHECKS = {"olmo-core": check_olmo, "torchtitan": check_torchtitan, "jax": check_jax, "maxtext": check_maxtext,
          "torch": check_torch, "megatron": check_megatron,
          "torchtitan-toml": lambda case, rm, text: check_torchtitan(case, rm, text, "torchtitan-toml")}

for case, expected in CASES:
    code, out, err = run(case, "rankmap")
    if code != 0:
        fail(case, "rankmap", err.strip())
        continue
    rm = json.loads(out)
    for fmt in FORMATS:
        code, out, err = run(case, fmt)
        if fmt in expected:
            if code != 0:
                fail(case, fmt, "refused: " + err.strip())
                continue
            try:
                CHECKS[fmt](case, rm, out)
            except Exception as e:  # a parse error or a missing key is a failure
                fail(case, fmt, f"{type(e).__name__}: {e}")
        elif code != 1 or not any(f"{fmt.removesuffix('-toml')} cannot {verb} this layout" in err
                                  for verb in ("express", "run")):
            fail(case, fmt, f"expected a refusal, got exit {code}: {err.strip()[:200]}")
    print(f"ok: {case}")

for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
