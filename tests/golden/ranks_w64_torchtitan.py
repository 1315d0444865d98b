# torchtitan config for tp=2,cp=2,dp=4,pp=4,ep=8,etp=1,edp=2,vpp=1,mbs=1,order=tp-cp-ep-dp-pp,cp_style=ring,recompute=full,placement=linear,dispatcher=deepep,a2a_overlap=0,precision=bf16,fsdp=1,tp_overlap=0,world=64 (foldplan export).
# For torchtitan after 2026-02-23 (Python configs), read at b5bcd76; releases with TOML
# configs: --format torchtitan-toml. Run with --module <this module> --config foldplan_config.
# Its process groups were checked equal to the rank map's (tp, cp, dp, dp_cp, pp and, with
# experts, ep, etp, edp): mesh (pp, dp_replicate, dp_shard, cp, tp) row-major, EP the innermost
# dp_shard x cp x tp ranks.
# Pipeline: 4 virtual stages in model order, decoder layers per stage: 17 16 16 12; torchtitan
# places them on the pp 4 ranks in a loop (stage s on rank s % pp).
# The plan holds 1 MTP layer(s) that these module names leave out (whether torchtitan's model has
# MTP modules was not read).
# Batch: micro-batch 1 x seq_len 4096 = 4096 tokens per data-parallel rank (a CP group reads one
# micro-batch and splits its sequences); global batch 1024 sequences = 256 micro-batches per step on
# each of the dp 4 ranks.

from torchtitan.config import ParallelismConfig, TrainingConfig
from torchtitan.distributed.activation_checkpoint import FullAC
from torchtitan.trainer import Trainer
from torchtitan.models.deepseek_v3 import model_registry


def foldplan_config() -> Trainer.Config:
    # moe_comm_backend deepep: the plan's dispatcher deepep.
    return Trainer.Config(
        model_spec=model_registry("671B", moe_comm_backend="deepep"),
        training=TrainingConfig(
            num_tokens_per_microbatch_per_dp_rank=4096,  # mbs 1 x seq_len 4096
            max_context_length=4096,
        ),
        parallelism=ParallelismConfig(
            data_parallel_replicate_degree=1,
            data_parallel_shard_degree=4,
            tensor_parallel_degree=2,
            enable_sequence_parallel=True,
            context_parallel_degree=2,
            context_parallel_load_balancer="headtail",
            pipeline_parallel_degree=4,
            pipeline_parallel_schedule="1F1B",
            num_pp_microbatches=256,
            # The stages hold exactly the modules below: no layer counted for the
            # embedding or the output.
            pipeline_parallel_first_stage_less_layers=0,
            pipeline_parallel_last_stage_less_layers=0,
            module_fqns_per_model_part=[
                # virtual stage 0: 17 decoder layers
                ["tok_embeddings", "layers.0", "layers.1", "layers.2", "layers.3", "layers.4",
                 "layers.5", "layers.6", "layers.7", "layers.8", "layers.9", "layers.10",
                 "layers.11", "layers.12", "layers.13", "layers.14", "layers.15", "layers.16"],
                # virtual stage 1: 16 decoder layers
                ["layers.17", "layers.18", "layers.19", "layers.20", "layers.21", "layers.22",
                 "layers.23", "layers.24", "layers.25", "layers.26", "layers.27", "layers.28",
                 "layers.29", "layers.30", "layers.31", "layers.32"],
                # virtual stage 2: 16 decoder layers
                ["layers.33", "layers.34", "layers.35", "layers.36", "layers.37", "layers.38",
                 "layers.39", "layers.40", "layers.41", "layers.42", "layers.43", "layers.44",
                 "layers.45", "layers.46", "layers.47", "layers.48"],
                # virtual stage 3: 12 decoder layers
                ["layers.49", "layers.50", "layers.51", "layers.52", "layers.53", "layers.54",
                 "layers.55", "layers.56", "layers.57", "layers.58", "layers.59", "layers.60",
                 "norm", "output"],
            ],
            expert_parallel_degree=8,
        ),
        activation_checkpoint=FullAC.Config(),  # recompute full: every block
    )


# The same parallelism as command-line overrides (--parallelism.* flags are still accepted
# and override the config; the value spelling is inferred):
#   --parallelism.data_parallel_replicate_degree 1
#   --parallelism.data_parallel_shard_degree 4
#   --parallelism.tensor_parallel_degree 2
#   --parallelism.enable_sequence_parallel True
#   --parallelism.context_parallel_degree 2
#   --parallelism.context_parallel_load_balancer headtail
#   --parallelism.pipeline_parallel_degree 4
#   --parallelism.pipeline_parallel_schedule 1F1B
#   --parallelism.num_pp_microbatches 256
#   --parallelism.pipeline_parallel_first_stage_less_layers 0
#   --parallelism.pipeline_parallel_last_stage_less_layers 0
#   --parallelism.expert_parallel_degree 8
# module_fqns_per_model_part (a list of lists) stays in the config: no flag spelling was read.
