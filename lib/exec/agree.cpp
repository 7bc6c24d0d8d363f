#include "exec/agree.hpp"

namespace octo::exec {

int lowest_failing_rank(Comm& world, bool failed) {
  // Max over (size - rank) picks the lowest failing rank; sizes stay far below 2^24, exact in float.
  float flag = failed ? static_cast<float>(world.size() - world.rank()) : 0.0f;
  world.all_reduce(std::span<float>(&flag, 1), ReduceOp::Max);
  return flag > 0 ? world.size() - static_cast<int>(flag) : -1;
}

std::optional<AgreedFailure> agree_on_failure(Comm& world, std::optional<ErrorKind> mine) {
  const int failed = lowest_failing_rank(world, mine.has_value());
  if (failed < 0) return std::nullopt;
  // The lowest failing rank tells every rank the kind of its error (the others add 0).
  float kind = world.rank() == failed ? static_cast<float>(*mine) : 0.0f;
  world.all_reduce(std::span<float>(&kind, 1), ReduceOp::Sum);
  return AgreedFailure{failed, static_cast<ErrorKind>(static_cast<int>(kind))};
}

}  // namespace octo::exec
