#!/usr/bin/env python3
"""Parses what `foldplan ranks --format F` prints for the trainer formats and
checks every degree against the rank map (`--format rankmap`).

    export_parse_check.py FOLDPLAN_BIN

olmo-core, jax and torch are parsed with `ast` (never executed: the trainers
need not be installed), torchtitan with `tomllib`, maxtext with `yaml`, the
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
import tomllib

import yaml

FOLDPLAN = sys.argv[1]

# (arguments, formats expected to export; every other trainer format must refuse).
# torch builds its meshes from the map's own rank arrays, so it exports every
# layout; Megatron has no gpipe or zb-h1 schedule.
CASES = [
    ("--world-size 16 --layout tp=2,cp=2,pp=2,ep=4,etp=1", {"olmo-core", "jax", "torch", "megatron"}),
    ("--world-size 16 --layout tp=1,cp=2,pp=2,ep=4,etp=1,cp_style=ring,recompute=full",
     {"olmo-core", "torchtitan", "jax", "torch", "megatron"}),
    ("--world-size 16 --layout tp=1,cp=1,pp=2,ep=4,etp=1,recompute=selective,fsdp=true",
     {"olmo-core", "torchtitan", "jax", "maxtext", "torch", "megatron"}),
    ("--world-size 16 --layout tp=2,cp=1,pp=1,ep=1,etp=2,recompute=moe_act+layernorm",
     {"torchtitan", "jax", "maxtext", "torch", "megatron"}),
    ("--world-size 16 --layout tp=2,cp=1,pp=2,ep=2,etp=2,schedule=gpipe", {"torchtitan", "jax", "torch"}),
    ("--world-size 16 --layout tp=2,cp=1,pp=2,ep=1,etp=2,order=tp-cp-ep-pp-dp",
     {"jax", "maxtext", "torch", "megatron"}),
    ("--world-size 12 --layout tp=2,cp=1,pp=1,ep=3,etp=1", {"olmo-core", "torch", "megatron"}),
    ("--cluster h100-dgx-16n --gpus 32 --model mixtral-8x7b --layout tp=1,cp=1,pp=4,vpp=2,ep=8,etp=1,fsdp=true",
     {"olmo-core", "torchtitan", "jax", "maxtext", "torch", "megatron"}),
    ("--cluster h100-dgx-16n --gpus 32 --model mixtral-8x7b --layout tp=2,cp=1,pp=2,ep=8,etp=1,schedule=zb-h1",
     {"jax", "torch"}),
    ("--cluster gb200-nvl72-4r --gpus 256 --model qwen3-30b-a3b "
     "--layout tp=1,cp=1,pp=1,ep=64,etp=1,placement=packed",
     {"olmo-core", "torchtitan", "jax", "maxtext", "torch", "megatron"}),
]
FORMATS = ["olmo-core", "torchtitan", "jax", "maxtext", "torch", "megatron"]
failures = []


def fail(case, fmt, msg):
    failures.append(f"{case} --format {fmt}: {msg}")


def run(args, fmt):
    p = subprocess.run([FOLDPLAN, "ranks", *args.split(), "--format", fmt], capture_output=True, text=True)
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


def check_olmo(case, rm, text):
    tree = ast.parse(text)
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    d = rm["degrees"]
    for cls in ["TransformerDataParallelConfig", "TransformerContextParallelConfig", "DataParallelType"]:
        if cls not in imported:
            fail(case, "olmo-core", f"does not import {cls}")
    v = calls(tree)
    for key, degree, cls in [("tp_config", d["tp"], "TransformerTensorParallelConfig"),
                             ("ep_config", d["ep"], "TransformerExpertParallelConfig"),
                             ("pp_config", d["pp"], "TransformerPipelineParallelConfig"),
                             ("cp_config", d["cp"], "TransformerContextParallelConfig")]:
        node = v.get(key)
        if degree == 1:
            if not (isinstance(node, ast.Constant) and node.value is None):
                fail(case, "olmo-core", f"{key} should be None for degree 1")
            continue
        if not isinstance(node, ast.Call) or kwarg(node, "degree") is None:
            fail(case, "olmo-core", f"{key} is no call with degree=")
            continue
        if ast.literal_eval(kwarg(node, "degree")) != degree:
            fail(case, "olmo-core", f"{key} degree != {degree}")
        func = ast.unparse(node.func)
        if not func.startswith(cls):
            fail(case, "olmo-core", f"{key} calls {func}, not {cls}")
        if key == "cp_config":
            want = "ulysses" if rm["cp_style"] == "ulysses" else "zig_zag"
            if func != f"{cls}.{want}":
                fail(case, "olmo-core", f"cp_config {func} for cp_style {rm['cp_style']}")
        if key == "pp_config":
            sched = ast.unparse(kwarg(node, "schedule"))
            want = {"1f1b": "single_1F1B", "interleaved-1f1b": "interleaved_1F1B", "gpipe": "gpipe"}
            name = rm.get("schedule", "interleaved-1f1b" if d["vpp"] > 1 else "1f1b")
            if sched != "PipelineScheduleType." + want[name]:
                fail(case, "olmo-core", f"schedule {sched} for {name}")
            if "stage_layers" in rm:
                points = ast.literal_eval(kwarg(node, "split_points"))
                cum = list(itertools.accumulate(rm["stage_layers"]))[:-1]
                if points != cum:
                    fail(case, "olmo-core", f"split_points {points} != {cum}")
    dp = v["dp_config"]
    name = ast.unparse(kwarg(dp, "name"))
    fsdp = layout_flags(case).get("fsdp") == "true"
    if name != ("DataParallelType.fsdp" if fsdp else "DataParallelType.ddp"):
        fail(case, "olmo-core", f"dp_config name {name}")
    if fsdp and ast.literal_eval(kwarg(dp, "shard_degree")) != d["dp"]:
        fail(case, "olmo-core", "shard_degree != dp")
    ac = v["ac_config"]
    rc = rm["recompute"]
    if rc == "none":
        ok = isinstance(ac, ast.Constant) and ac.value is None
    else:
        mode = ast.unparse(kwarg(ac, "mode"))
        ok = mode.endswith(".full" if rc == "full" else ".selected_modules")
        if rc != "full":
            ok = ok and len(ast.literal_eval(kwarg(ac, "modules"))) > 0
    if not ok:
        fail(case, "olmo-core", f"ac_config does not express recompute {rc}")


def check_torchtitan(case, rm, text):
    t = tomllib.loads(text)
    p, d = t["parallelism"], rm["degrees"]
    want = {"data_parallel_shard_degree": d["dp"], "tensor_parallel_degree": d["tp"],
            "context_parallel_degree": d["cp"], "pipeline_parallel_degree": d["pp"],
            "expert_parallel_degree": d["ep"], "data_parallel_replicate_degree": 1}
    for key, value in want.items():
        if p.get(key) != value:
            fail(case, "torchtitan", f"{key} = {p.get(key)}, expected {value}")
    if d["pp"] > 1:
        names = {"1f1b": "1F1B", "interleaved-1f1b": "Interleaved1F1B", "gpipe": "GPipe", "dualpipev": "DualPipeV"}
        name = rm.get("schedule", "interleaved-1f1b" if d["vpp"] > 1 else "1f1b")
        if p.get("pipeline_parallel_schedule") != names[name]:
            fail(case, "torchtitan", f"schedule {p.get('pipeline_parallel_schedule')} for {name}")
        layers = rm.get("stage_layers")
        if layers and len(set(layers)) == 1 and p.get("pipeline_parallel_layers_per_stage") != layers[0]:
            fail(case, "torchtitan", "pipeline_parallel_layers_per_stage missing or wrong")
    mode = t["activation_checkpoint"]["mode"]
    rc = rm["recompute"]
    if mode != ("none" if rc == "none" else "full" if rc == "full" else "selective"):
        fail(case, "torchtitan", f"activation_checkpoint.mode {mode} for recompute {rc}")


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


def check_maxtext(case, rm, text):
    y = yaml.safe_load(text)
    axes = ["data", "pipeline", "fsdp", "context", "tensor", "expert"]
    ici = [y[f"ici_{a}_parallelism"] for a in axes]
    dcn = [y[f"dcn_{a}_parallelism"] for a in axes]
    shape = [a * b for a, b in zip(ici, dcn)]
    d, w = rm["degrees"], rm["world_size"]
    if math.prod(shape) != w:
        fail(case, "maxtext", f"mesh {shape} is not the world {w}")
        return
    want = {"pipeline": d["pp"], "context": d["cp"], "tensor": d["tp"], "expert": d["ep"]}
    for a, n in want.items():
        if shape[axes.index(a)] != n:
            fail(case, "maxtext", f"{a} {shape[axes.index(a)]} != {n}")
    if shape[0] * shape[2] * shape[5] != d["dp"]:
        fail(case, "maxtext", "data x fsdp x expert != dp")
    kinds = {"pp": [1], "tp": [4], "cp": [3], "dp": [0, 2, 5], "dp_cp": [0, 2, 3, 5], "ep": [5],
             "etp": [4], "edp": [0, 2, 3]}
    for kind, ax in kinds.items():
        if kind in rm["groups"] and not same_groups(mesh_groups(shape, ax), rm["groups"][kind]):
            fail(case, "maxtext", f"{kind} groups of the mesh differ from the rank map's")
    check_granules(case, "maxtext", rm, ici)


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


def check_megatron(case, rm, text):
    words = shlex.split(" ".join(l for l in text.splitlines() if not l.startswith("#")).replace("\\", " "))
    flags = {}
    for i, w in enumerate(words):
        if w.startswith("--"):
            flags[w] = words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("--") else True
    d = rm["degrees"]
    want = {"--tensor-model-parallel-size": d["tp"], "--pipeline-model-parallel-size": d["pp"],
            "--context-parallel-size": d["cp"], "--expert-model-parallel-size": d["ep"],
            "--expert-tensor-parallel-size": d["etp"]}
    for flag, value in want.items():
        if str(flags.get(flag)) != str(value):
            fail(case, "megatron", f"{flag} {flags.get(flag)}, expected {value}")


CHECKS = {"olmo-core": check_olmo, "torchtitan": check_torchtitan, "jax": check_jax, "maxtext": check_maxtext,
          "torch": check_torch, "megatron": check_megatron}

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
        elif code != 1 or f"{fmt} cannot express this layout" not in err:
            fail(case, fmt, f"expected a refusal, got exit {code}: {err.strip()[:200]}")
    print(f"ok: {case}")

for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
