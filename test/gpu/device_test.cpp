// The CUDA device itself: the caching allocator's reuse (no cudaMalloc once a training step has
// run), events between the compute and communication streams, configuration and limit errors.

#include <catch2/catch.hpp>
#include <cstdlib>

#include "cuda/cuda_device.hpp"
#include "cuda/kernels.hpp"
#include "gpu_testing.hpp"
#include "nn/data.hpp"
#include "nn/model.hpp"
#include "spec/loader.hpp"

using namespace octo;
using namespace octo::gpu_test;
using Catch::Matchers::Contains;

namespace {

const std::string kTinyHybrid = std::string(OCTO_SOURCE_DIR) + "/profiles/models/tiny-hybrid.yaml";

const nn::TextData& corpus() {
  static const nn::TextData data =
      nn::TextData::load(std::string(OCTO_SOURCE_DIR) + "/profiles/data/tiny-corpus.txt");
  return data;
}

/// F then B and W of two micro-batches of the whole model, as a training step does.
void train_step(nn::StageNet& net, const ModelSpec& model, int step) {
  std::vector<nn::StageContext> ctx;
  for (int m = 0; m < 2; ++m) {
    ctx.push_back(
        net.make_context(corpus().microbatch(nn::microbatch_index(step, m, 2), model.training.micro_batch,
                                             static_cast<int>(model.seq_len)),
                         1.0f / 256));
    const nn::Buffer loss = net.forward(ctx.back(), nn::Buffer{});
  }
  for (auto& c : ctx) {
    const nn::Buffer dx = net.backward(c, nn::Buffer{});
  }
  net.device().synchronize();
}

}  // namespace

TEST_CASE("the caching allocator serves later training steps without cudaMalloc", "[device]") {
  if (dry_run()) return;  // CudaDevice only
  cuda::CudaDevice dev;
  const ModelSpec model = load_model(kTinyHybrid);
  nn::StageNet net(model, 0, model.layers.size(), 1, dev);
  train_step(net, model, 0);
  const cuda::AllocatorStats warm = dev.allocator_stats();
  for (int s = 1; s <= 3; ++s) train_step(net, model, s);
  const cuda::AllocatorStats later = dev.allocator_stats();
  CHECK(later.device_mallocs == warm.device_mallocs);
  CHECK(later.cache_hits > warm.cache_hits);
  CHECK(later.reserved_bytes == warm.reserved_bytes);

  // Freed blocks return to their size class.
  const auto before = dev.allocator_stats().device_mallocs;
  for (int i = 0; i < 100; ++i) {
    nn::Buffer a = dev.alloc<float>(1000 + i % 3);  // same size class (4 KiB)
    nn::Buffer b = dev.alloc<float>(1 << 20);
  }
  CHECK(dev.allocator_stats().device_mallocs - before <= 2);
}

TEST_CASE("events order work between the communication and compute streams", "[device]") {
  if (dry_run()) return;
  cuda::CudaDevice dev;
  const std::size_t n = std::size_t{1} << 26;  // 256 MiB: the fill outlasts the launch of the reader
  nn::Buffer big = dev.alloc<float>(n);
  dev.fill(big.data(), n, 0.0f);
  dev.synchronize();
  // Written on the communication stream, read on the compute stream after waiting for its event.
  cuda::kernels::fill(dev.comm_stream(), big.data(), n, 2.0f);
  const auto written = dev.record_event_on(dev.comm_stream());
  dev.wait_event(*written);
  CHECK(dev.sum_squares(n, big.data()) == 4.0 * static_cast<double>(n));
  CHECK(written->ready());

  // Produced on the compute stream, consumed on the communication stream after stream_wait.
  nn::Buffer out = dev.alloc<float>(n);
  dev.fill(big.data(), n, 3.0f);
  dev.stream_wait(dev.comm_stream(), dev.compute_stream());
  cuda::kernels::axpby(dev.comm_stream(), n, 1.0f, big.data(), 0.0f, out.data());
  dev.stream_wait(dev.compute_stream(), dev.comm_stream());
  CHECK(dev.sum_squares(n, out.data()) == 9.0 * static_cast<double>(n));

  const auto e = dev.record_event();
  e->synchronize();
  CHECK(e->ready());
}

TEST_CASE("GEMM precision from OCTO_CUDA_GEMM, clear errors for memory and kernel limits", "[device]") {
  if (dry_run()) return;
  ::setenv("OCTO_CUDA_GEMM", "tf32", 1);
  {
    cuda::CudaDevice dev;
    CHECK(dev.gemm_precision() == cuda::GemmPrecision::Tf32);
    CHECK_THAT(dev.describe(), Contains("GEMM tf32") && Contains("cuda:"));
  }
  ::unsetenv("OCTO_CUDA_GEMM");
  cuda::CudaDevice dev;
  CHECK(dev.gemm_precision() == cuda::GemmPrecision::Bf16);  // the default
  CHECK_THROWS_WITH(dev.alloc<float>(std::size_t{1} << 45), Contains("out of memory allocating"));
  nn::Buffer x = dev.alloc<float>(1024);
  nn::AttentionShape big{1, 4, 2, 1, 512, 1.0f};
  CHECK_THROWS_WITH(dev.attention_forward(big, x.data(), x.data(), x.data(), 1024, x.data(), 1024, x.data()),
                    Contains("head_dim 512"));
  nn::SsdShape ssd{1, 4, 1, 32, 300, 1, 16};
  CHECK_THROWS_WITH(dev.ssd_forward(ssd, nn::SsdArgs{}, x.data(), x.data()), Contains("state 300"));
  CHECK_THROWS_WITH(cuda::CudaDevice(cuda::CudaDeviceOptions{999}), Contains("device 999 requested"));
}
