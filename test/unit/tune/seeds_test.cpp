// Seed structures (tune/seeds.hpp) with the map search: deterministic, well-formed, ranked by their
// structure bound within each stage count, and the map-searched ones (descend_map) only where their
// structure bound is below every fixed shape's of as many or fewer stages.

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
  bool searched = false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].ends == b[i].ends);
    CHECK(a[i].device == b[i].device);
    CHECK(a[i].map_searched == b[i].map_searched);
    Candidate c;
    c.ends = a[i].ends;
    c.device = a[i].device;
    c.recompute = a[i].recompute;
    CHECK(well_formed(c, 4, n));
    CHECK(a[i].bound_ms == Approx(ev.structure_bound_ms(c)));
    if (i > 0 && a[i].ends.size() == a[i - 1].ends.size()) CHECK(a[i].bound_ms >= a[i - 1].bound_ms - 1e-9);
    if (!a[i].map_searched) continue;
    searched = true;
    CHECK(a[i].ends.size() % 4 == 0);
    // Below every fixed-shape seed of as many or fewer stages.
    for (const Structure& o : a)
      if (!o.map_searched && o.ends.size() <= a[i].ends.size()) CHECK(a[i].bound_ms < o.bound_ms);
  }
  CHECK(searched);
}

TEST_CASE("seed structures stop at the first stage count once told to", "[tune][seeds]") {
  const PlannerInputs in = load_inputs([] {
    InputOptions o;
    o.model_path = std::string(OCTO_SOURCE_DIR) + "/profiles/models/nemotron-h-8b.yaml";
    o.pp = 4;
    o.microbatches = 8;
    return o;
  }());
  const Evaluator ev(in, 4, 8, 0);
  const std::vector<double> work = layer_work_ms(in.costs);
  const std::vector<Structure> all = seed_structures(in, ev, work);
  int asked = 0;
  const std::vector<Structure> first = seed_structures(in, ev, work, [&] { return ++asked > 0; });
  CHECK(asked == 1);  // asked before the second stage count, never before the first
  REQUIRE_FALSE(first.empty());
  CHECK(first.size() < all.size());
  for (std::size_t i = 0; i < first.size(); ++i) {
    CHECK(first[i].ends.size() == 4);  // the stage count p
    CHECK(first[i].ends == all[i].ends);
    CHECK(first[i].device == all[i].device);
  }
}

}  // namespace octo
