#include "nn/reference.hpp"

#include "core/error.hpp"
#include "nn/model.hpp"

namespace octo::nn {

SequentialResult run_sequential(const ModelSpec& model, std::uint64_t seed, const TextData& data,
                                std::int64_t step, int microbatches, Device& device) {
  if (microbatches <= 0) fail("run_sequential: microbatches must be positive (got {})", microbatches);
  const int batch = model.training.micro_batch;
  const int seq = static_cast<int>(model.seq_len);
  StageNet net(model, 0, model.layers.size(), seed, device);
  const float scale =
      1.0f / (static_cast<float>(microbatches) * static_cast<float>(batch) * static_cast<float>(seq));
  std::vector<StageContext> ctxs;
  SequentialResult result;
  for (int i = 0; i < microbatches; ++i) {
    ctxs.push_back(
        net.make_context(data.microbatch(microbatch_index(step, i, microbatches), batch, seq), scale));
    const Buffer loss = net.forward(ctxs.back(), Buffer{});
    result.microbatch_losses.push_back(read_scalar(device, loss.data()));
    result.loss += result.microbatch_losses.back();
  }
  for (StageContext& ctx : ctxs) {
    const Buffer dx = net.backward(ctx, Buffer{});
  }
  for (const auto& layer : net.layers()) result.grads.push_back(device.download(layer->params().grads()));
  return result;
}

}  // namespace octo::nn
