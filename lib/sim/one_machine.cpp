#include "sim/one_machine.hpp"

#include <algorithm>
#include <queue>

namespace octo {

double preemptive_one_machine_bound(std::vector<MachineJob> jobs) {
  std::sort(jobs.begin(), jobs.end(),
            [](const MachineJob& a, const MachineJob& b) { return a.release < b.release; });
  // Released jobs by tail (largest first), each with the duration it still has to run.
  struct Left {
    double tail, duration;
    bool operator<(const Left& o) const { return tail < o.tail; }
  };
  std::priority_queue<Left> ready;
  double t = 0, length = 0;
  std::size_t next = 0;
  while (next < jobs.size() || !ready.empty()) {
    if (ready.empty()) t = std::max(t, jobs[next].release);
    while (next < jobs.size() && jobs[next].release <= t) {
      ready.push({jobs[next].tail, jobs[next].duration});
      ++next;
    }
    Left job = ready.top();
    ready.pop();
    // Run it until it ends or the next release may preempt it.
    const double until = next < jobs.size() ? jobs[next].release : t + job.duration;
    if (t + job.duration <= until) {
      t += job.duration;
      length = std::max(length, t + job.tail);
    } else {
      job.duration -= until - t;
      t = until;
      ready.push(job);
    }
  }
  return length;
}

}  // namespace octo
