// Seed structures (tune/seeds.hpp) with the map search: deterministic, well-formed, ranked by their
// structure bound within each stage count, and reaching the multiples of the device count that
// no fixed shape seeds (5 × PP here) through descend_map.

#include "tune/seeds.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "cost/inputs.hpp"
#include "sched/partition.hpp"
#include "tune/map_search.hpp"
#include "tune/neighbourhood.hpp"

namespace octo {

TEST_CASE("seed structures with map-searched maps are deterministic and well-formed", "[tune][seeds]") {
  InputOptions o;
  o.model_path = std::string(OCTO_SOURCE_DIR) + "/profiles/models/nemotron-h-8b.yaml";
  o.pp = 4;
  o.microbatches = 8;
  const PlannerInputs in = load_inputs(o);
  const Evaluator ev(in, 4, 8, 0);
  const std::vector<double> work = layer_work_ms(in.costs);
  const int n = static_cast<int>(work.size());
  REQUIRE(n >= 20);
  const std::vector<Structure> a = seed_structures(in, ev, work), b = seed_structures(in, ev, work);
  REQUIRE(a.size() == b.size());
  bool five = false, searched = false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].ends == b[i].ends);
    CHECK(a[i].device == b[i].device);
    Candidate c;
    c.ends = a[i].ends;
    c.device = a[i].device;
    c.recompute = a[i].recompute;
    CHECK(well_formed(c, 4, n));
    CHECK(a[i].bound_ms == Approx(ev.structure_bound_ms(c)));
    if (i > 0 && a[i].ends.size() == a[i - 1].ends.size()) CHECK(a[i].bound_ms >= a[i - 1].bound_ms - 1e-9);
    searched = searched || a[i].map_searched;
    if (a[i].ends.size() == 20) {
      five = true;
      CHECK(a[i].map_searched);  // 5 × PP has no fixed shape
    }
  }
  CHECK(searched);
  CHECK(five);
}

}  // namespace octo
