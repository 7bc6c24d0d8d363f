#pragma once
/// The attention family of nn::Device (device.hpp): rotary embeddings and causal self-attention
/// with grouped KV heads. CPU: nn/cpu/attention.cpp; CUDA: cuda/attention.cu.

namespace octo::nn {

/// Causal self-attention shapes: `batch` sequences of `seq` tokens, `heads` query heads sharing
/// `kv_heads` key/value heads (GQA: query head h uses kv head h / (heads / kv_heads)).
struct AttentionShape {
  int batch = 0, seq = 0, heads = 0, kv_heads = 0, head_dim = 0;
  float scale = 0;  ///< applied to q.k, usually 1 / sqrt(head_dim)
};

class AttentionKernels {
 public:
  /// Rotary embedding in place on `heads` heads of each row (row stride ld; token t of a sequence
  /// has position t % seq). Pairs (i, i + head_dim/2) rotate by the angle whose cos/sin are
  /// table[pos * head_dim/2 + i]; inverse rotates back (the backward).
  virtual void rope(int rows, int seq, int heads, int head_dim, float* x, int ld, const float* cos_table,
                    const float* sin_table, bool inverse) = 0;
  /// o = softmax(scale q k^T, causal) v per head; lse[batch*heads*seq] keeps the row
  /// log-sum-exp for the backward. q, k, v share row stride ld_qkv; o has row stride ld_o.
  virtual void attention_forward(const AttentionShape& s, const float* q, const float* k, const float* v,
                                 int ld_qkv, float* o, int ld_o, float* lse) = 0;
  /// dq, dk, dv (row stride ld_qkv, overwritten) from d_o.
  virtual void attention_backward(const AttentionShape& s, const float* q, const float* k, const float* v,
                                  int ld_qkv, const float* o, const float* d_o, int ld_o, const float* lse,
                                  float* dq, float* dk, float* dv) = 0;

 protected:
  ~AttentionKernels() = default;
};

}  // namespace octo::nn
