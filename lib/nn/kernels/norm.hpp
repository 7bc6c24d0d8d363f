#pragma once
/// The normalization family of nn::Device (device.hpp): reductions along each row, RMSNorm and
/// the softmax cross-entropy of the LM head. CPU: nn/cpu/norm.cpp; CUDA: cuda/norm.cu.

#include <cstdint>

namespace octo::nn {

class NormKernels {
 public:
  /// RMSNorm of each of `groups` equal slices of each row (dim = full row length, weight has dim
  /// entries): y = x * rstd * w; rstd[rows*groups] is saved for the backward.
  virtual void rmsnorm_forward(int rows, int dim, int groups, const float* x, const float* w, float eps,
                               float* y, float* rstd) = 0;
  /// dx = residual + d(norm)/dx^T dy; residual may be null (then dx is overwritten).
  virtual void rmsnorm_backward_input(int rows, int dim, int groups, const float* x, const float* w,
                                      const float* rstd, const float* dy, const float* residual,
                                      float* dx) = 0;
  /// dw += sum over rows of dy * x * rstd.
  virtual void rmsnorm_backward_weight(int rows, int dim, int groups, const float* x, const float* rstd,
                                       const float* dy, float* dw) = 0;

  /// loss[0] = scale * sum over rows of -log softmax(logits)[target]; lse[rows] saved.
  virtual void cross_entropy_forward(int rows, int vocab, const float* logits, const std::int32_t* targets,
                                     float scale, float* lse, float* loss) = 0;
  /// dlogits = scale * (softmax(logits) - onehot(target)); dlogits may alias logits.
  virtual void cross_entropy_backward(int rows, int vocab, const float* logits, const float* lse,
                                      const std::int32_t* targets, float scale, float* dlogits) = 0;

  // ---- the same split over the ranks of a tensor-parallel group --------------------------------
  // A norm whose slice spans ranks (Mamba's gated norm when its groups are fewer than the tensor
  // ranks), and the cross-entropy of a vocabulary cut into shards of `vocab` columns starting at
  // column `first` of the full vocabulary: each rank computes its partial row sums, the layer
  // all-reduces them over the group, and the second kernel finishes the row with the totals.

  /// out[r] = sum_j x[r,j]^2 (dy null), or sum_j dy[r,j] w[j] x[r,j] (the backward's row dot),
  /// over the rows x dim slice this rank holds.
  virtual void rmsnorm_partial_sums(int rows, int dim, const float* x, const float* w, const float* dy,
                                    float* out) = 0;
  /// RMSNorm of rows whose slices of `count` elements in all have the all-reduced squares `sumsq`:
  /// rstd[r] = 1 / sqrt(sumsq[r] / count + eps), y = x rstd w (rows x dim, this rank's part).
  virtual void rmsnorm_forward_sums(int rows, int dim, const float* x, const float* w, const float* sumsq,
                                    int count, float eps, float* y, float* rstd) = 0;
  /// dx (overwritten) of rmsnorm_forward_sums, from the all-reduced row dots `dot` (above).
  virtual void rmsnorm_backward_input_sums(int rows, int dim, const float* x, const float* w,
                                           const float* rstd, const float* dy, const float* dot, int count,
                                           float* dx) = 0;
  /// out[r] = max_j x[r, j] of a rows x cols matrix.
  virtual void row_max(int rows, int cols, const float* x, float* out) = 0;
  /// For this rank's logit columns [first, first + vocab) of the full vocabulary:
  /// sumexp[r] = sum_j exp(logits[r,j] - max[r]) and target_logit[r] = the target's logit when
  /// this rank holds the target's column, else 0.
  virtual void cross_entropy_shard_sums(int rows, int vocab, const float* logits, const std::int32_t* targets,
                                        int first, const float* max, float* sumexp, float* target_logit) = 0;
  /// From the all-reduced max, sumexp and target logits: lse[r] = max[r] + log(sumexp[r]) and
  /// loss[0] = scale * sum_r (lse[r] - target_logit[r]).
  virtual void cross_entropy_shard_loss(int rows, const float* max, const float* sumexp,
                                        const float* target_logit, float scale, float* lse, float* loss) = 0;
  /// dlogits = scale * (softmax - onehot(target)) on this rank's columns [first, first + vocab);
  /// dlogits may alias logits.
  virtual void cross_entropy_shard_backward(int rows, int vocab, const float* logits, const float* lse,
                                            const std::int32_t* targets, int first, float scale,
                                            float* dlogits) = 0;

 protected:
  ~NormKernels() = default;
};

}  // namespace octo::nn
