"""Checks what `foldplan ranks --format olmo-core` prints against the rank map.

    check(text, rankmap, fmt) -> list of errors (empty: the export is right)

`text` is the export, `rankmap` the `foldplan ranks --format rankmap` JSON of
the same layout (a dict), `fmt` the format name used in the messages. The
snippet is parsed with `ast`, never executed (OLMo-core need not be
installed). Checked:

- every import, call keyword and enum member written is in
  tests/data/trainer_keys/olmo-core.txt (OLMo-core fa6c5014's names);
- the degrees multiply as OLMo-core checks them: pp x dp x cp x tp is the
  world, HSDP's num_replicas x shard_degree is dp, expert parallelism only
  with HSDP and shard_degree = ep, and never with tensor parallelism;
- the groups of the world mesh OLMo-core builds from those settings
  (slowest first pp, dp or dp_replicate and dp_shard, cp, tp; with HSDP the
  expert groups are the dp_shard groups) equal the rank map's tp, cp, dp,
  dp_cp, pp and, with EP, ep and edp groups;
- the rest says what the rank map says: CP style, schedule, split points,
  data-parallel kind (fsdp, or ddp without), activation checkpointing.
"""
import ast
import itertools

from common import canonical, load_keys, mesh_groups

CONFIG_VARS = ["dp_config", "tp_config", "cp_config", "ep_config", "pp_config", "ac_config"]
SCHEDULES = {"1f1b": "single_1F1B", "interleaved-1f1b": "interleaved_1F1B", "gpipe": "gpipe"}


def _names_written(tree):
    """Every name the snippet writes that must be in the key list."""
    out = []
    call_funcs = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            out += [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.Call):
            func = ast.unparse(node.func)
            call_funcs.add(id(node.func))
            out += [f"{func}.{kw.arg}" for kw in node.keywords]
            if node.args:
                out.append(f"{func}(positional arguments)")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in call_funcs:
            out.append(ast.unparse(node))
    return out


def _kwargs(call):
    return {kw.arg: kw.value for kw in call.keywords}


def _literal(node, what, errors):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        errors.append(f"{what} is not a literal: {ast.unparse(node)}")
        return None


def check(text, rankmap, fmt="olmo-core"):
    errors = []
    err = lambda msg: errors.append(f"{fmt}: {msg}")
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        return [f"{fmt}: not Python: {e}"]
    keys = load_keys("olmo-core")
    for name in _names_written(tree):
        if name not in keys:
            err(f"writes {name}, not in olmo-core.txt")

    config = {}
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            config[node.targets[0].id] = node.value
        else:
            err(f"unexpected statement: {ast.unparse(node)[:80]}")
    for var in CONFIG_VARS:
        if var not in config:
            err(f"no {var}")
            return errors
        if not (isinstance(config[var], ast.Call) or
                (isinstance(config[var], ast.Constant) and config[var].value is None)):
            err(f"{var} is neither a call nor None")
            return errors

    def degree(var, cls):
        node = config[var]
        if isinstance(node, ast.Constant):
            return 1, None
        func = ast.unparse(node.func)
        if func.split(".")[0] != cls:
            err(f"{var} calls {func}, not {cls}")
        kw = _kwargs(node)
        if "degree" not in kw:
            err(f"{var} has no degree=")
            return 1, func
        d = _literal(kw["degree"], f"{var} degree", errors)
        if not isinstance(d, int) or d < 1:
            err(f"{var} degree {d} is no positive int")
            return 1, func
        if d == 1:
            err(f"{var} has degree 1: OLMo-core takes None")
        return d, func

    tp, _ = degree("tp_config", "TransformerTensorParallelConfig")
    cp, cp_func = degree("cp_config", "TransformerContextParallelConfig")
    ep, _ = degree("ep_config", "TransformerExpertParallelConfig")
    pp, _ = degree("pp_config", "TransformerPipelineParallelConfig")

    # Data parallelism, and the degrees as OLMo-core's build_world_mesh checks them.
    w = rankmap["world_size"]
    if w % (pp * cp * tp):
        err(f"pp {pp} x cp {cp} x tp {tp} does not divide the world {w}")
        return errors
    dp = w // (pp * cp * tp)
    dpc = config["dp_config"]
    if not isinstance(dpc, ast.Call) or ast.unparse(dpc.func) != "TransformerDataParallelConfig":
        err("dp_config is no TransformerDataParallelConfig")
        return errors
    kw = _kwargs(dpc)
    kind = ast.unparse(kw["name"]) if "name" in kw else None
    if kind not in ("DataParallelType.fsdp", "DataParallelType.hsdp", "DataParallelType.ddp"):
        err(f"dp_config name {kind}")
        return errors
    kind = kind.split(".")[1]
    replicas, shard = 1, dp
    if kind in ("fsdp", "hsdp"):
        replicas = _literal(kw.get("num_replicas", ast.Constant(1)), "num_replicas", errors)
        shard = _literal(kw.get("shard_degree", ast.Constant(dp)), "shard_degree", errors)
        if not isinstance(replicas, int) or not isinstance(shard, int) or replicas * shard != dp:
            err(f"num_replicas {replicas} x shard_degree {shard} != dp {dp}")
            return errors
        if kind == "fsdp" and replicas != 1:
            err(f"fsdp with num_replicas {replicas}: that is HSDP")
    if ep > 1:
        if kind != "hsdp":
            err(f"expert parallelism needs HSDP data parallelism, dp_config is {kind}")
        elif shard != ep:
            err(f"HSDP's shard_degree {shard} must equal the EP degree {ep}")
        if tp > 1:
            err("expert parallelism is mutually exclusive with tensor parallelism")

    d = rankmap["degrees"]
    for name, ours in [("tp", tp), ("cp", cp), ("ep", ep), ("pp", pp), ("dp", dp)]:
        if ours != d[name]:
            err(f"{name} {ours} != the rank map's {d[name]}")
    if errors:
        return errors

    # The world mesh, slowest first: pp, dp_replicate, dp_shard, cp, tp (for
    # fsdp and ddp one dp dimension: replicate 1).
    hsdp = kind == "hsdp"
    shape = [pp, replicas if hsdp else 1, shard if hsdp else dp, cp, tp]
    kinds = {"tp": [4], "cp": [3], "dp": [1, 2], "dp_cp": [1, 2, 3], "pp": [0]}
    if ep > 1:
        kinds.update({"ep": [2], "edp": [1], "etp": []})
    for name, axes in kinds.items():
        if mesh_groups(shape, axes) != canonical(rankmap["groups"][name]):
            err(f"{name} groups of OLMo-core's mesh {shape} differ from the rank map's")

    # What the rank map says of the rest.
    fsdp = bool(rankmap.get("recipe", {}).get("fsdp", False))
    want = "hsdp" if ep > 1 else "fsdp" if fsdp else "ddp"
    if kind != want:
        err(f"dp_config {kind} for fsdp {fsdp}, ep {ep}: expected {want}")
    if cp > 1:
        style = "ulysses" if rankmap["cp_style"] == "ulysses" else "zig_zag"
        if cp_func != f"TransformerContextParallelConfig.{style}":
            err(f"cp_config {cp_func} for cp_style {rankmap['cp_style']}")
    if pp > 1:
        ppk = _kwargs(config["pp_config"])
        schedule = rankmap.get("schedule", "interleaved-1f1b" if d["vpp"] > 1 else "1f1b")
        got = ast.unparse(ppk["schedule"]) if "schedule" in ppk else None
        if schedule not in SCHEDULES or got != "PipelineScheduleType." + SCHEDULES[schedule]:
            err(f"schedule {got} for {schedule}")
        layers = rankmap.get("stage_layers")
        if layers and len(layers) > 1:
            points = _literal(ppk.get("split_points", ast.Constant(None)), "split_points", errors)
            cum = list(itertools.accumulate(layers))[:-1]
            if points != cum:
                err(f"split_points {points} != {cum}")
    ac = config["ac_config"]
    rc = rankmap["recompute"]
    if rc == "none":
        ok = isinstance(ac, ast.Constant) and ac.value is None
    else:
        ok = isinstance(ac, ast.Call)
        if ok:
            ack = _kwargs(ac)
            mode = ast.unparse(ack["mode"]) if "mode" in ack else ""
            ok = mode.endswith(".full" if rc == "full" else ".selected_modules")
            if ok and rc != "full":
                modules = _literal(ack.get("modules", ast.Constant(None)), "modules", errors)
                ok = isinstance(modules, list) and len(modules) > 0
    if not ok:
        err(f"ac_config does not express recompute {rc}")
    return errors
