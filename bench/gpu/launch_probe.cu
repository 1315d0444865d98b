// What the host pays to make the GPU run a kernel, measured with the CUDA
// runtime alone (no framework): the CPU time of one cudaLaunchKernel of an
// empty kernel, the GPU time one empty kernel occupies back to back, the
// same through a CUDA graph (one cudaGraphLaunch for many kernels), and
// what a device-to-host read that the host waits for costs: its round trip
// on an idle GPU, and the GPU time it leaves idle when it ends a queue of
// work (the queue drains, then the GPU waits for the next launch).
// Prints one JSON object (units in the names); bench/gpu/host_attention.sh
// runs it. Build: nvcc -O2 -arch=sm_90 launch_probe.cu -o launch_probe
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

#define CHECK(call)                                                                      \
  do {                                                                                   \
    cudaError_t e_ = (call);                                                             \
    if (e_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

__global__ void Empty() {}

// Spins for `cycles` SM clock cycles (a stand-in for a queue of work).
__global__ void Spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Seconds of GPU time between two events around `body` on `stream`.
template <class F>
double GpuSeconds(cudaStream_t stream, F body) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  CHECK(cudaEventRecord(a, stream));
  body();
  CHECK(cudaEventRecord(b, stream));
  CHECK(cudaEventSynchronize(b));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  return ms * 1e-3;
}

}  // namespace

int main() {
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  int driver = 0, runtime = 0;
  CHECK(cudaDriverGetVersion(&driver));
  CHECK(cudaRuntimeGetVersion(&runtime));

  // Warm-up: module load, first-launch costs.
  for (int i = 0; i < 1000; ++i) Empty<<<1, 1, 0, stream>>>();
  CHECK(cudaStreamSynchronize(stream));

  // 1. Host cost of a launch: issue N empty kernels while the GPU keeps up
  // (an empty kernel takes ~1-2 us of GPU time), per launch.
  const int kLaunches = 20000;
  std::vector<double> host_us, wall_us;
  for (int rep = 0; rep < 7; ++rep) {
    const double t0 = Now();
    for (int i = 0; i < kLaunches; ++i) Empty<<<1, 1, 0, stream>>>();
    const double t1 = Now();
    CHECK(cudaStreamSynchronize(stream));
    const double t2 = Now();
    host_us.push_back((t1 - t0) / kLaunches * 1e6);
    wall_us.push_back((t2 - t0) / kLaunches * 1e6);
  }

  // 2. GPU time per empty kernel back to back: the queue filled first
  // (a spin kernel holds the GPU while the host enqueues), then timed.
  const int kQueued = 1000;
  std::vector<double> gpu_us;
  for (int rep = 0; rep < 7; ++rep) {
    Spin<<<1, 1, 0, stream>>>(20'000'000);  // ~10 ms at ~2 GHz
    const double s = GpuSeconds(stream, [&] {
      for (int i = 0; i < kQueued; ++i) Empty<<<1, 1, 0, stream>>>();
    });
    gpu_us.push_back(s / kQueued * 1e6);
  }

  // 3. A CUDA graph of kNodes empty kernels: host cost of one
  // cudaGraphLaunch, GPU time per node.
  const int kNodes = 100;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < kNodes; ++i) Empty<<<1, 1, 0, stream>>>();
  CHECK(cudaStreamEndCapture(stream, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 20; ++i) CHECK(cudaGraphLaunch(exec, stream));
  CHECK(cudaStreamSynchronize(stream));
  std::vector<double> graph_host_us, graph_node_gpu_us;
  for (int rep = 0; rep < 7; ++rep) {
    const int kReplays = 200;
    Spin<<<1, 1, 0, stream>>>(20'000'000);
    double host = 0;
    const double s = GpuSeconds(stream, [&] {
      const double t0 = Now();
      for (int i = 0; i < kReplays; ++i) CHECK(cudaGraphLaunch(exec, stream));
      host = Now() - t0;
    });
    graph_host_us.push_back(host / kReplays * 1e6);
    graph_node_gpu_us.push_back(s / (double(kReplays) * kNodes) * 1e6);
  }

  // 4. Device-to-host read the host waits for (Megatron's token counts,
  // .item()): a 4-byte copy into pinned memory and a stream sync, on an
  // idle GPU.
  int* dev = nullptr;
  int* host = nullptr;
  CHECK(cudaMalloc(&dev, sizeof(int)));
  CHECK(cudaMallocHost(&host, sizeof(int)));
  std::vector<double> roundtrip_us;
  for (int i = 0; i < 200; ++i) {
    const double t0 = Now();
    CHECK(cudaMemcpyAsync(host, dev, sizeof(int), cudaMemcpyDeviceToHost, stream));
    CHECK(cudaStreamSynchronize(stream));
    if (i >= 20) roundtrip_us.push_back((Now() - t0) * 1e6);
  }

  // 5. What a sync at the end of a queue of work exposes: iterations of
  // [spin kernel of ~G us; D2H read; host waits] against the spin kernels
  // alone back to back. The difference per iteration is the GPU's idle
  // time per sync: the copy, the host waking, the next launch reaching the
  // GPU.
  int clock_khz = 0;
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  long long cycles_per_us = clock_khz / 1000;  // kHz -> cycles per us
  if (cycles_per_us <= 0) cycles_per_us = 1500;
  const long long spin_cycles = 200 * cycles_per_us;  // ~200 us of GPU work
  std::vector<double> spin_alone_us, spin_sync_us;
  for (int rep = 0; rep < 7; ++rep) {
    const int kIters = 100;
    const double alone = GpuSeconds(stream, [&] {
      for (int i = 0; i < kIters; ++i) Spin<<<1, 1, 0, stream>>>(spin_cycles);
    });
    spin_alone_us.push_back(alone / kIters * 1e6);
    const double t0 = Now();
    for (int i = 0; i < kIters; ++i) {
      Spin<<<1, 1, 0, stream>>>(spin_cycles);
      CHECK(cudaMemcpyAsync(host, dev, sizeof(int), cudaMemcpyDeviceToHost, stream));
      CHECK(cudaStreamSynchronize(stream));
    }
    spin_sync_us.push_back((Now() - t0) / kIters * 1e6);
  }

  const double spin_alone = Median(spin_alone_us), spin_sync = Median(spin_sync_us);
  std::printf(
      "{\n"
      "  \"gpu\": \"%s\",\n"
      "  \"sms\": %d,\n"
      "  \"cuda_driver\": %d,\n"
      "  \"cuda_runtime\": %d,\n"
      "  \"method\": \"median of 7 repetitions (round trip: of 180 reads); host times from std::chrono::steady_clock, GPU times from CUDA events\",\n"
      "  \"launch_host_us\": %.4f,\n"
      "  \"launch_wall_us\": %.4f,\n"
      "  \"empty_kernel_gpu_us\": %.4f,\n"
      "  \"graph_nodes\": %d,\n"
      "  \"graph_launch_host_us\": %.4f,\n"
      "  \"graph_node_gpu_us\": %.4f,\n"
      "  \"d2h_roundtrip_idle_us\": %.4f,\n"
      "  \"spin_kernel_gpu_us\": %.4f,\n"
      "  \"spin_then_sync_wall_us\": %.4f,\n"
      "  \"sync_exposed_us\": %.4f\n"
      "}\n",
      prop.name, prop.multiProcessorCount, driver, runtime, Median(host_us), Median(wall_us), Median(gpu_us),
      kNodes, Median(graph_host_us), Median(graph_node_gpu_us), Median(roundtrip_us), spin_alone, spin_sync,
      spin_sync - spin_alone);
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaFree(dev));
  CHECK(cudaFreeHost(host));
  CHECK(cudaStreamDestroy(stream));
  return 0;
}
