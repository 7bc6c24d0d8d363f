#include "spec/kind.hpp"
#include "spec/model.hpp"

namespace octo {

std::string_view to_string(BlockKind kind) {
  for (const LayerKind* k : layer_kinds())
    if (k->id == kind) return k->name;
  return "?";
}

std::string_view to_string(Activation act) {
  switch (act) {
    case Activation::SwiGlu:
      return "swiglu";
    case Activation::SquaredRelu:
      return "squared_relu";
    case Activation::Gelu:
      return "gelu";
  }
  return "?";
}

std::string_view to_string(DType dtype) {
  switch (dtype) {
    case DType::BF16:
      return "bf16";
    case DType::FP16:
      return "fp16";
    case DType::FP32:
      return "fp32";
  }
  return "?";
}

std::string_view to_string(RecomputePolicy policy) {
  switch (policy) {
    case RecomputePolicy::None:
      return "none";
    case RecomputePolicy::Full:
      return "full";
    case RecomputePolicy::Auto:
      return "auto";
  }
  return "?";
}

int dtype_bytes(DType dtype) { return dtype == DType::FP32 ? 4 : 2; }

}  // namespace octo
