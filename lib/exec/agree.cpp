#include "exec/agree.hpp"

namespace octo::exec {

int lowest_failing_rank(Comm& world, bool failed) {
  // Max over (size - rank) picks the lowest failing rank; sizes stay far below 2^24, exact in float.
  float flag = failed ? static_cast<float>(world.size() - world.rank()) : 0.0f;
  world.all_reduce(std::span<float>(&flag, 1), ReduceOp::Max);
  return flag > 0 ? world.size() - static_cast<int>(flag) : -1;
}

}  // namespace octo::exec
