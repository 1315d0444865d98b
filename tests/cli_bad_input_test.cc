// Bad input through the command line: a clear message naming the file, the
// JSON pointer, what was expected and what was found; exit code 1 for a bad
// input file or a value the inputs refuse, 2 for a flag value that is wrong
// on its own (doc/formats.md, Exit codes); no crash.
#include <cstdio>
#include <fstream>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

#include "cli_run.h"


using foldplan::testing::ExpectExit;
using foldplan::testing::ExpectUsage;
using foldplan::testing::RunFoldplan;

namespace {

void ExpectError(const std::string& args, const std::string& fragment) { ExpectExit(1, args, fragment); }

}  // namespace

TEST_CASE("a model file with a wrong field") {
  ExpectError("enumerate --model tests/data/cli/bad_top_k.json",
              "tests/data/cli/bad_top_k.json: /moe/top_k: expected an integer");
}

TEST_CASE("a file that is not JSON") {
  ExpectError("enumerate --cluster tests/data/cli/not_json.json", "tests/data/cli/not_json.json:3:");
}

TEST_CASE("an unknown shipped name lists the shipped ones") {
  ExpectError("enumerate --model mixtral-9x9b", "mixtral-8x7b");
}

TEST_CASE("a missing file") {
  ExpectError("topo --cluster ./no-such-cluster.json", "no-such-cluster.json");
}

TEST_CASE("bad overrides: a value wrong on its own is usage, one the cluster refuses is not") {
  ExpectUsage("enumerate --precision fp4", "--precision: expected one of bf16, fp8-delayed");
  ExpectError("enumerate --nodes 3 --cluster gb200-nvl72-4r", "do not fill whole 72-GPU NVLink domains");
  ExpectUsage("enumerate --seq 0", "--seq: expected an integer in [1, 16777216], found 0");
}

TEST_CASE("bad layouts: a malformed text is usage, one the world cannot run is not") {
  ExpectError("ranks --world-size 16 --layout tp=3", "does not divide the world size 16");
  ExpectUsage("ranks --world-size 16 --layout tp=2,zz=1", "unknown key \"zz\"");
  ExpectUsage("ranks --world-size 16 --layout tp=2 --format deepspeed", "deepspeed");
}

TEST_CASE("usage errors exit 2") {
  auto r = RunFoldplan("enumerate --no-such-flag");
  CHECK(r.exit_code == 2);
  r = RunFoldplan("");
  CHECK(r.exit_code == 2);
}

TEST_CASE("bad recipe options") {
  ExpectUsage("plan --recompute none,layernorm+attn", "--recompute layernorm+attn: unknown module \"attn\"");
  ExpectUsage("plan --dispatcher nccl", "--dispatcher: expected one of alltoall, allgather, deepep (alias flex), hybridep");
  ExpectError("plan --precision mxfp8",
              "precision mxfp8 (--precision) on cluster h100-dgx-16n: mxfp8 needs Blackwell tensor cores "
              "(MX block scales in hardware) (H100 SXM5 is hopper)");
  ExpectUsage("plan --fix zz=1", "--fix zz=1: layout: unknown key \"zz\"");
  ExpectError("plan --gpus-per-domain 3 --cluster gb200-nvl72-4r",
              "3 GPUs per NVLink domain: expected a multiple of the 4 GPUs per node, at most the domain's 72");
  ExpectUsage("plan --routing-imbalance 0.5", "--routing-imbalance: expected a number in [1, 65536]");
}

TEST_CASE("bad pipeline layouts name the problem and where it is") {
  const std::string ds = "enumerate --model deepseek-v3 --cluster h100-dgx-128n --layout tp=1,pp=8,vpp=4,ep=32,etp=1,";
  // Malformed: usage. Well formed but not this model's: the pipeline_split rule.
  ExpectUsage(ds + "pp_layout='Et|(tt|*30L'", "pp_layout=Et|(tt|*30L: column 4: '(' without ')'");
  ExpectUsage(ds + "pp_layout='tE|(tt|)*30L'", "E must open the first stage (found on stage 0)");
  ExpectError(ds + "pp_layout='Et|(tt|)*30tL'", "pipeline_split: the layout places 62 decoder layers, the model has 61");
  ExpectError(ds + "pp_layout='Et|(tt|)*29ttmm|L'", "pipeline_split: the layout places 2 MTP layers (m), the model has 1");
}

// A gpus_per_domain the cluster cannot give: the error names where the value
// came from, the flag or the job file's field, not always both.
TEST_CASE("a gpus_per_domain the cluster cannot give names its origin") {
  const std::string why = "3 GPUs per NVLink domain: expected a multiple of the 4 GPUs per node, at most the domain's 72";
  ExpectError("enumerate --cluster gb200-nvl72-4r --gpus-per-domain 3", "foldplan: --gpus-per-domain: " + why);
  ExpectError("enumerate --cluster gb200-nvl72-4r --job tests/data/cli/job_gpus_per_domain_3.json",
              "foldplan: tests/data/cli/job_gpus_per_domain_3.json: /gpus_per_domain: " + why);
  ExpectError("ranks --cluster gb200-nvl72-4r --model qwen3-235b-a22b --layout tp=1,pp=8,ep=8 "
              "--job tests/data/cli/job_gpus_per_domain_3.json",
              "foldplan: tests/data/cli/job_gpus_per_domain_3.json: /gpus_per_domain: " + why);
}

// A recipe's precision the GPU cannot run: the error points at the field
// that set it, the recipe's /job/precision, or, when the recipe leaves it to
// its base job, that job file's /precision (not the recipe's /precision).
TEST_CASE("a recipe's unrunnable precision names the field that set it") {
  const std::string why = "on cluster h100-dgx-16n: mxfp8 needs Blackwell tensor cores";
  ExpectError("explain --recipe tests/data/cli/recipe_mxfp8_on_h100.json",
              "foldplan: precision mxfp8 (tests/data/cli/recipe_mxfp8_on_h100.json: /job/precision) " + why);
  ExpectError("plan --recipe tests/data/cli/recipe_base_mxfp8_on_h100.json",
              "foldplan: precision mxfp8 (tests/data/cli/job_mxfp8.json: /precision) " + why);
  ExpectError("explain --job tests/data/cli/job_mxfp8.json --layout tp=1",
              "foldplan: precision mxfp8 (tests/data/cli/job_mxfp8.json: /precision) " + why);
  ExpectError("explain --recipe tests/data/cli/recipe_mxfp8_on_h100.json --precision bf16,mxfp8",
              "foldplan: precision mxfp8 (--precision) " + why);
}

// The attention backend: a name it does not know is usage (2); one the
// GPU or the model cannot run is an invalid input (1), naming the field or
// flag that set it. FlashAttention-3 is Hopper's; FlashAttention-2 cannot
// run MLA's unequal head dims.
TEST_CASE("an attention backend the GPU or the model cannot run names its origin") {
  ExpectUsage("plan --attention-backend flash",
              "foldplan: --attention-backend: expected one of te-cudnn, flash2, flash3, found \"flash\"; did you mean "
              "\"flash2\"?\n");
  ExpectError("plan --cluster b200-dgx-32n --attention-backend flash3",
              "foldplan: attention_backend flash3 (--attention-backend) on cluster b200-dgx-32n: flash3 "
              "(FlashAttention-3) runs on Hopper only (B200 SXM is blackwell); use te-cudnn or flash2\n");
  ExpectError("explain --cluster gb200-nvl72-4r --job tests/data/cli/job_flash3.json --layout tp=1",
              "foldplan: attention_backend flash3 (tests/data/cli/job_flash3.json: /attention_backend) on cluster "
              "gb200-nvl72-4r: flash3 (FlashAttention-3) runs on Hopper only");
  ExpectError("enumerate --model deepseek-v3 --attention-backend flash2",
              "foldplan: attention_backend flash2 (--attention-backend) on cluster h100-dgx-16n: flash2 "
              "(FlashAttention-2) needs equal q/k and v head dims, and model deepseek-v3 has 192 and 128; use "
              "te-cudnn or flash3\n");
  // What Hopper runs is accepted: flash3 on an H100, flash2 on a GQA model.
  for (const char* ok : {"enumerate --attention-backend flash3 --limit 1",
                         "enumerate --model mixtral-8x7b --attention-backend flash2 --limit 1"}) {
    const auto r = RunFoldplan(ok);
    CHECK_MESSAGE(r.exit_code == 0, ok << ": " << r.err);
  }
}

// A candidate given twice in a list flag, an alias included (fp8 is
// fp8-tensorwise, flex is deepep), would be searched twice: refused as the
// job reader refuses a repeat in a job file, naming the flag; exit 2.
TEST_CASE("a candidate flag that repeats a value is refused") {
  ExpectUsage("plan --precision bf16,bf16", "foldplan: --precision: bf16 given twice\n");
  ExpectUsage("plan --precision fp8-tensorwise,fp8 --cluster gb200-nvl72-4r",
              "foldplan: --precision: fp8-tensorwise given twice (fp8 is fp8-tensorwise)\n");
  ExpectUsage("plan --dispatcher alltoall,flex,deepep", "foldplan: --dispatcher: deepep given twice (flex is deepep)\n");
  ExpectUsage("enumerate --dispatcher flex,flex", "foldplan: --dispatcher: deepep given twice (flex is deepep)\n");
  ExpectUsage("explain --recipe qwen3-235b-gb200-tp1-pp8-ep8 --dispatcher hybridep,hybridep",
              "foldplan: --dispatcher: hybridep given twice\n");
  // --recompute, checked before, keeps its message; an alias is named too.
  ExpectUsage("plan --recompute none,full,none", "foldplan: --recompute: none given twice\n");
  ExpectUsage("plan --recompute selective,core_attn", "foldplan: --recompute: selective given twice (core_attn is selective)\n");
  ExpectUsage("plan --recompute moe+mlp,mlp+moe",
              "foldplan: --recompute: mlp+moe given twice (moe+mlp is mlp+moe)\n");
}

// Deep nesting used to overflow the stack when an error message quoted the
// value (nlohmann's recursive dump): now refused while parsing, by pointer.
TEST_CASE("a cluster file nested a million levels deep is refused, not a crash") {
  const std::string file = "/tmp/foldplan_deep_" + std::to_string(::getpid()) + ".json";
  {
    std::ofstream out(file);
    out << "{\"schema\": \"foldplan.cluster/v1\", \"nodes\": " << std::string(1000000, '[')
        << std::string(1000000, ']') << "}";
  }
  auto r = RunFoldplan("topo --cluster " + file, 60);
  CHECK(r.exit_code == 1);
  CHECK(r.err.rfind("foldplan: " + file + ": /nodes/0/0/", 0) == 0);
  CHECK(r.err.find("nested deeper than 64 levels") != std::string::npos);
  std::remove(file.c_str());
}

TEST_CASE("inputs that are not regular files are refused at once: a FIFO does not block, a device is not read") {
  const std::string fifo = foldplan::testing::TempPath("input_fifo");
  std::remove(fifo.c_str());
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // Each blocked forever before (run with a limit, so a hang fails).
  for (const std::string& args : {"check " + fifo, "simulate --model mixtral-8x7b --layout tp=1,pp=4,ep=8 --imbalance " + fifo}) {
    const auto r = RunFoldplan(args, 20);
    CHECK_MESSAGE(r.exit_code == 1, args << "\nstderr: " << r.err);
    CHECK(r.err.find(fifo + ": is a FIFO (a named pipe), not a regular file") != std::string::npos);
  }
  std::remove(fifo.c_str());
  ExpectError("check /dev/zero", "/dev/zero: is a character device, not a regular file");
  ExpectError("enumerate --cluster /dev/urandom", "/dev/urandom: is a character device, not a regular file");
}

TEST_CASE("an expert-loads file whose total overflows is refused, not simulated as balanced") {
  ExpectError("check fuzz/corpus/expert_loads/total_overflows.json",
              "fuzz/corpus/expert_loads/total_overflows.json: /loads: expected loads whose sum is finite");
}

TEST_CASE("an expert-loads file of another length than the model's experts is refused before the run") {
  ExpectError("simulate --model mixtral-8x7b --layout tp=1,pp=4,ep=8 --imbalance fuzz/corpus/expert_loads/three_loads.json",
              "fuzz/corpus/expert_loads/three_loads.json: /loads: expected 8 loads (the model's experts), found 3");
}

TEST_CASE("imbalance on a dense model is a usage error") {
  // Was accepted, and switched to the every-rank path.
  ExpectUsage("simulate --model llama3-70b --layout tp=8,pp=4 --imbalance uniform",
              "--imbalance uniform: the model has no experts (a dense model): imbalance needs a MoE model");
  ExpectUsage("simulate --model llama3-70b --layout tp=8,pp=4 --imbalance tests/data/expert_loads/skewed8.json",
              "the model has no experts");
}

TEST_CASE("compare with a measurements file of no ops is an error that says why") {
  ExpectError("compare --plan tests/data/validate/pp2_cp2_ep4.plan.json --measurements fuzz/corpus/measurements/no_ops.json",
              "fuzz/corpus/measurements/no_ops.json: /ops: no op measured (the list is empty)");
}

TEST_CASE("check refuses a measured op of an unknown name") {
  ExpectError("check fuzz/corpus/measurements/unknown_op.json",
              "fuzz/corpus/measurements/unknown_op.json: /ops/0/op: expected one of \"ulysses\"");
}

TEST_CASE("plan -o FILE when nothing fits leaves FILE as it was") {
  const std::string file = foldplan::testing::TempPath("plan_nothing_fits.json");
  { std::ofstream(file) << "the old plan\n"; }
  // Was: FILE replaced by a plan of zero candidates.
  // The answer (no layout fits, and what to change) is printed; no file.
  const auto r = RunFoldplan("plan --model mixtral-8x22b --gpus 8 --fix tp=1 -o " + file);
  CHECK(r.exit_code == 1);
  CHECK_MESSAGE(r.err.find("not writing " + file + ": no layout fits") != std::string::npos, r.err);
  CHECK(foldplan::testing::Slurp(file) == "the old plan\n");
  std::remove(file.c_str());
}

TEST_CASE("control bytes of an input are escaped in the message that quotes it") {
  const auto r = RunFoldplan("ranks --world-size 16 --layout tp=2,pp=2,ep=4 --format slurm --hosts "
                             "fuzz/corpus/hosts/control_bytes.txt");
  CHECK(r.exit_code == 1);
  CHECK_MESSAGE(r.err.find("control_bytes.txt:2: \"node\\x1b[31mred\\x07\": expected one host name per line") !=
                    std::string::npos,
                r.err);
  CHECK(r.err.find('\x1b') == std::string::npos);
  CHECK(r.err.find('\x07') == std::string::npos);
  // A flag's value too.
  const auto flag = RunFoldplan("plan --seq \"$(printf '\\033[2J\\007')\"");
  CHECK(flag.exit_code == 2);
  CHECK(flag.err.find("found \"\\x1b[2J\\x07\"") != std::string::npos);
  CHECK(flag.err.find('\x1b') == std::string::npos);
}
