"""Checks a torchtitan export (`foldplan ranks --format torchtitan|torchtitan-toml`)
against the rank map of the same layout (`--format rankmap`, parsed JSON).

    spec = importlib.util.spec_from_file_location("tt_export_check", "tests/trainer_exports/torchtitan.py")
    ...  # load it under a name that does not shadow torchtitan itself
    errors = module.check(text, rankmap, "torchtitan")

The export is parsed, never run (torchtitan need not be installed): the
Python module with `compile()` and `ast`, the TOML with `tomllib`. Checked:

- every key it sets is in tests/data/trainer_keys/<fmt>.txt (the keys read in
  torchtitan's sources, doc/trainers.md): Python keywords of ParallelismConfig,
  TrainingConfig, model_registry and Trainer.Config; TOML tables and keys;
- the degrees multiply to the world as torchtitan's ParallelDims checks
  (dp_replicate x dp_shard x cp x tp x pp == world; ep divides
  dp_shard x cp x tp) and equal the rank map's, the layout's dp all on
  dp_shard when it plans FSDP (fsdp 1);
- the groups rebuilt from the exported degrees equal the rank map's:
  torchtitan's mesh (pp, dp_replicate, dp_shard, cp, tp) row-major gives tp,
  cp, dp, dp_cp and pp; EP takes the innermost ranks of dp_shard x cp x tp,
  a sparse mesh (pp, dp_replicate, efsdp, ep, etp) with etp = tp without EP
  and 1 with it, giving ep, etp and edp (for a model with experts);
- the pipeline: the schedule's torch name, the modules of each virtual stage
  (or, TOML with an even split, the layers per stage) against the map's
  stage_layers with no layer counted for the embedding or the output,
  num_pp_microbatches against the job's global batch;
- the Python module's batch (tokens per micro-batch per dp rank), MoE
  communication backend, activation checkpointing and FP8 converters against
  the map's recipe; the TOML's expert_parallel_comm_backend.

check() returns a list of error strings, empty when the export is right.
"""
import ast
import math
import tomllib

from common import canonical, load_keys, mesh_groups


SCHEDULES = {"1f1b": "1F1B", "interleaved-1f1b": "Interleaved1F1B", "gpipe": "GPipe", "dualpipev": "DualPipeV"}
COMM_BACKENDS = {"alltoall": "standard", "deepep": "deepep", "hybridep": "hybridep"}
CONVERTERS = {"fp8-tensorwise": {"Float8LinearConverter", "Float8GroupedExpertsConverter"},
              "mxfp8": {"MXFP8LinearConverter", "MXFP8GroupedExpertsConverter"}}
ALL_CONVERTERS = set().union(*CONVERTERS.values())


def stage_modules(stage_layers):
    """torchtitan module FQNs per virtual stage, in model order."""
    out, layer = [], 0
    for s, n in enumerate(stage_layers):
        mods = ["tok_embeddings"] if s == 0 else []
        mods += [f"layers.{layer + i}" for i in range(n)]
        layer += n
        if s == len(stage_layers) - 1:
            mods += ["norm", "output"]
        out.append(mods)
    return out


class _Export:
    """What an export sets: `keys` maps each key-list name to its value."""

    def __init__(self):
        self.keys = {}
        self.imports = {}  # name -> module
        self.errors = []

    def parallelism(self, key, default=None):
        return self.keys.get(f"parallelism.{key}", default)


def _literal(node, where, exp):
    try:
        return ast.literal_eval(node)
    except ValueError:
        exp.errors.append(f"{where} is not a literal: {ast.unparse(node)}")
        return None


def _parse_python(text):
    exp = _Export()
    try:
        compile(text, "<torchtitan export>", "exec")
        tree = ast.parse(text)
    except SyntaxError as e:
        exp.errors.append(f"does not compile: {e}")
        return exp
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for a in node.names:
                exp.imports[a.asname or a.name] = node.module
        if not isinstance(node, ast.Call):
            continue
        func = ast.unparse(node.func)
        prefix = {"ParallelismConfig": "parallelism.", "TrainingConfig": "training.",
                  "model_registry": "model_registry.", "Trainer.Config": ""}.get(func)
        for kw in node.keywords:
            if kw.arg is None:
                exp.errors.append(f"{func}(**...) sets keys that cannot be checked")
                continue
            if prefix is None:
                exp.errors.append(f"{func} is called with {kw.arg}=, which no key list holds")
                continue
            name = prefix + kw.arg
            if name in exp.keys:
                exp.errors.append(f"{name} is set twice")
            if func == "Trainer.Config":
                exp.keys[name] = kw.value  # a section: its node
            else:
                exp.keys[name] = _literal(kw.value, name, exp)
        if func == "model_registry":
            exp.keys["model_registry()"] = [_literal(a, "model_registry's flavor", exp) for a in node.args]
    return exp


def _parse_toml(text):
    exp = _Export()
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        exp.errors.append(f"is no TOML: {e}")
        return exp
    for table, body in doc.items():
        if not isinstance(body, dict):
            exp.keys[table] = body  # a key outside any table: its name alone
            continue
        for key, value in body.items():
            exp.keys[f"{table}.{key}"] = value
    return exp


def _has_experts(rm):
    owner = rm.get("expert_owner", {})
    if "model" in rm:
        return owner.get("experts") is not None
    return rm["degrees"]["ep"] > 1


def check(text: str, rankmap: dict, fmt: str) -> list[str]:
    if fmt == "torchtitan":
        exp = _parse_python(text)
    elif fmt == "torchtitan-toml":
        exp = _parse_toml(text)
    else:
        return [f"unknown format {fmt!r} (torchtitan or torchtitan-toml)"]
    errors = exp.errors
    if errors:
        return errors
    python = fmt == "torchtitan"
    allowed = load_keys(fmt)
    for key in exp.keys:
        if key != "model_registry()" and key not in allowed:
            errors.append(f"sets {key}, which is not in {fmt}.txt (keys read in torchtitan's sources)")

    rm, d, world = rankmap, rankmap["degrees"], rankmap["world_size"]
    p = exp.parallelism
    pp, tp, cp = p("pipeline_parallel_degree", 1), p("tensor_parallel_degree", 1), p("context_parallel_degree", 1)
    rep, shard, ep = p("data_parallel_replicate_degree", 1), p("data_parallel_shard_degree", -1), \
        p("expert_parallel_degree", 1)
    if not all(isinstance(v, int) and v >= 1 for v in [pp, tp, cp, rep, ep]) or not isinstance(shard, int):
        return errors + [f"degrees are no positive integers: pp {pp} tp {tp} cp {cp} replicate {rep} ep {ep}"]
    if shard == -1:  # the rest
        shard = world // (rep * cp * tp * pp)
    if rep * shard * cp * tp * pp != world:
        return errors + [f"dp_replicate {rep} x dp_shard {shard} x cp {cp} x tp {tp} x pp {pp} != world {world}"]
    if (shard * cp * tp) % ep:
        return errors + [f"ep {ep} does not divide dp_shard {shard} x cp {cp} x tp {tp}"]
    for name, ours, theirs in [("pp", pp, d["pp"]), ("tp", tp, d["tp"]), ("cp", cp, d["cp"]),
                               ("dp", rep * shard, d["dp"]), ("ep", ep, d["ep"])]:
        if ours != theirs:
            errors.append(f"{name} {ours}, the rank map's {theirs}")

    # The groups of torchtitan's meshes against the map's.
    dense = [pp, rep, shard, cp, tp]
    kinds = {"tp": [4], "cp": [3], "dp": [1, 2], "dp_cp": [1, 2, 3], "pp": [0]}
    for kind, axes in kinds.items():
        if mesh_groups(dense, axes) != canonical(rm["groups"][kind]):
            errors.append(f"{kind} groups of the mesh (pp, dp_replicate, dp_shard, cp, tp) differ from the rank map's")
    if _has_experts(rm):
        etp = tp if ep == 1 else 1
        sparse = [pp, rep, shard * cp * tp // (ep * etp), ep, etp]
        for kind, axes in {"ep": [3], "etp": [4], "edp": [1, 2]}.items():
            if mesh_groups(sparse, axes) != canonical(rm["groups"][kind]):
                errors.append(f"{kind} groups of the sparse mesh (pp, dp_replicate, efsdp, ep, etp) differ from "
                              "the rank map's")

    if rankmap.get("recipe", {}).get("fsdp") and rep != 1:
        errors.append(f"dp_replicate {rep} with fsdp: the plan shards over all of dp {d['dp']} (FSDP2, no HSDP)")
    if tp > 1 and p("enable_sequence_parallel") is not True:
        errors.append("tp > 1 without enable_sequence_parallel")
    if cp > 1 and p("context_parallel_load_balancer", "headtail") != "headtail":
        errors.append(f"context_parallel_load_balancer {p('context_parallel_load_balancer')}, not headtail")

    # The pipeline.
    if pp > 1:
        name = rm.get("schedule", "interleaved-1f1b" if d["vpp"] > 1 else "1f1b")
        if p("pipeline_parallel_schedule") != SCHEDULES.get(name):
            errors.append(f"pipeline_parallel_schedule {p('pipeline_parallel_schedule')} for {name}")
        layers = rm.get("stage_layers")
        fqns = p("module_fqns_per_model_part")
        even = layers and len(set(layers)) == 1
        if layers and (python or not even):
            if fqns != stage_modules(layers):
                errors.append(f"module_fqns_per_model_part is not the split {layers}")
        elif layers:
            if p("pipeline_parallel_layers_per_stage") != layers[0]:
                errors.append(f"pipeline_parallel_layers_per_stage {p('pipeline_parallel_layers_per_stage')}, "
                              f"the split {layers}")
        if layers and (fqns is None or python):
            for key in ["pipeline_parallel_first_stage_less_layers", "pipeline_parallel_last_stage_less_layers"]:
                if p(key) != 0:
                    errors.append(f"{key} {p(key)}: torchtitan would count a layer the split does not hold")
        if fqns is not None and not layers:
            errors.append("module_fqns_per_model_part without the map's stage_layers")
        job = rm.get("job")
        if job and job["global_batch"] % (d["dp"] * d["mbs"]) == 0:
            want = job["global_batch"] // (d["dp"] * d["mbs"])
            if p("num_pp_microbatches") != want:
                errors.append(f"num_pp_microbatches {p('num_pp_microbatches')}, expected {want}")

    recipe = rm.get("recipe", {})
    backend = COMM_BACKENDS.get(recipe.get("dispatcher"))
    if python:
        job = rm.get("job")
        if job:
            want = {"training.num_tokens_per_microbatch_per_dp_rank": d["mbs"] * job["seq_len"],
                    "training.max_context_length": job["seq_len"]}
            for key, value in want.items():
                if exp.keys.get(key) != value:
                    errors.append(f"{key} {exp.keys.get(key)}, expected {value}")
        if _has_experts(rm) and exp.keys.get("model_registry.moe_comm_backend") != backend:
            errors.append(f"moe_comm_backend {exp.keys.get('model_registry.moe_comm_backend')} for dispatcher "
                          f"{recipe.get('dispatcher')}")
        ac = exp.keys.get("activation_checkpoint")
        ac_text = ast.unparse(ac) if ac is not None else "(unset)"
        want_ac = {"none": "None", "full": "FullAC.Config()"}.get(rm["recompute"], "SelectiveAC.Config()")
        if ac_text != want_ac:
            errors.append(f"activation_checkpoint {ac_text} for recompute {rm['recompute']}")
        converters = {n for n, m in exp.imports.items() if n in ALL_CONVERTERS}
        want_conv = CONVERTERS.get(recipe.get("precision"), set())
        if converters != want_conv:
            errors.append(f"imports converters {sorted(converters)} for precision {recipe.get('precision')}")
        if any(exp.imports[n] != "torchtitan.components.quantization" for n in converters):
            errors.append("converters imported from elsewhere than torchtitan.components.quantization")
    elif _has_experts(rm) and p("expert_parallel_comm_backend") != backend:
        errors.append(f"expert_parallel_comm_backend {p('expert_parallel_comm_backend')} for dispatcher "
                      f"{recipe.get('dispatcher')}")
    return errors
