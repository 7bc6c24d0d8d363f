#pragma once
/// The routing family of nn::Device (device.hpp): the MoE router's top-k softmax, sorting tokens
/// by expert, and the row gathers and scatters that move tokens (the embedding's lookup and its
/// gradient too). CPU: nn/cpu/moe.cpp; CUDA: cuda/moe.cu. Every scatter is written per
/// destination row or sequentially, so results are deterministic on every backend.

#include <cstdint>

namespace octo::nn {

class MoeKernels {
 public:
  /// Picks the k largest logits of each row (ties: lower expert index first) and their softmax
  /// weights: idx, weight are rows x k.
  virtual void topk_softmax_forward(int rows, int experts, int k, const float* logits, std::int32_t* idx,
                                    float* weight) = 0;
  /// dlogits (rows x experts, overwritten; zero outside the chosen experts) from dweight.
  virtual void topk_softmax_backward(int rows, int experts, int k, const std::int32_t* idx,
                                     const float* weight, const float* dweight, float* dlogits) = 0;
  /// Sorts the rows*k (token, slot) assignments by expert (stable): token_of_row[r] is the token
  /// of permuted row r, row_of_slot[t*k + j] the permuted row of token t's j-th choice, and
  /// offsets[e]..offsets[e+1] the rows of expert e (offsets has experts + 1 entries).
  virtual void moe_permute(int rows, int k, int experts, const std::int32_t* idx, std::int32_t* token_of_row,
                           std::int32_t* row_of_slot, std::int32_t* offsets) = 0;
  /// dst[i] = src[index[i]] for n rows of dim.
  virtual void gather_rows(int n, int dim, const float* src, const std::int32_t* index, float* dst) = 0;
  /// dst[index[i]] += src[i] for n rows of dim (the embedding gradient).
  virtual void scatter_add_rows(int n, int dim, const float* src, const std::int32_t* index, float* dst) = 0;
  /// dst[t] (+)= sum_j src[index[t*k + j]] for t < n: the transpose of a k-way gather, written
  /// per destination row so it is deterministic on every backend.
  virtual void gather_sum_rows(int n, int k, int dim, const float* src, const std::int32_t* index, float* dst,
                               bool accumulate) = 0;
  /// out[t] (+)= sum_j weight[t,j] ye[row_of_slot[t*k + j]].
  virtual void moe_combine_forward(int n, int k, int dim, const float* ye, const std::int32_t* row_of_slot,
                                   const float* weight, float* out, bool accumulate) = 0;
  /// dye[row_of_slot[t,j]] = weight[t,j] dout[t]; dweight[t,j] = dout[t] . ye[row_of_slot[t,j]].
  virtual void moe_combine_backward(int n, int k, int dim, const float* ye, const std::int32_t* row_of_slot,
                                    const float* weight, const float* dout, float* dye, float* dweight) = 0;
  /// The vocabulary-parallel embedding's lookup: dst[i] = src[index[i] - first] when index[i] is
  /// in [first, first + count) (this rank's rows of the table), else zeros.
  virtual void gather_rows_range(int n, int dim, const float* src, const std::int32_t* index, int first,
                                 int count, float* dst) = 0;
  /// Its gradient: dst[index[i] - first] += src[i] for the indices in [first, first + count).
  virtual void scatter_add_rows_range(int n, int dim, const float* src, const std::int32_t* index, int first,
                                      int count, float* dst) = 0;

 protected:
  ~MoeKernels() = default;
};

}  // namespace octo::nn
