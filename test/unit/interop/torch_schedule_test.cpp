// torch.distributed.pipelining schedules: the CSV torch's runtime loads, checked against torch's own
// rules (re-stated here as an independent oracle); export → import is the identity on baselines and
// tuned plans, with and without comms; recompute is refused or stripped; bad CSVs fail at the cell.

#include "interop/torch_schedule.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "core/fs.hpp"
#include "cost/inputs.hpp"
#include "cost/profile_io.hpp"
#include "interop/torch_csv.hpp"
#include "interop/torch_stages.hpp"
#include "plan/plan_io.hpp"
#include "sched/baseline.hpp"
#include "support/temp_dir.hpp"
#include "tune/tuner.hpp"

namespace {

using octo::Plan;
using octo::TorchAction;
using octo::TorchActionType;

std::string src(const std::string& rel) { return std::string(OCTO_SOURCE_DIR) + "/" + rel; }

octo::PlannerInputs inputs(const std::string& model, const std::string& cluster, int pp, int m, int dp = 0,
                           int ep = 0, int zero = -1) {
  octo::InputOptions o;
  o.model_path = model;
  o.cluster_path = cluster;
  o.pp = pp;
  o.microbatches = m;
  o.dp = dp;
  o.ep = ep;
  o.zero = zero;
  return octo::load_inputs(o);
}

octo::CostProfile costs_of(const Plan& p) { return octo::parse_costs(p.costs_yaml, "embedded costs"); }

Plan import(const octo::TorchExport& ex, const Plan& original) {
  Plan skeleton = octo::parse_torch_stages(ex.stages, "stages.json");
  return octo::import_torch_schedule(ex.csv, "schedule.csv", skeleton, costs_of(original));
}

/// Everything but the predicted metrics (the caller re-simulates) and the generator stamp.
void check_same_plan(const Plan& a, Plan b) {
  b.predicted = a.predicted;
  b.generator = a.generator;
  CHECK(b.method == a.method);
  CHECK(b.devices == a.devices);
  CHECK(b.tp == a.tp);
  CHECK(b.dp == a.dp);
  CHECK(b.ep == a.ep);
  CHECK(b.zero == a.zero);
  CHECK(b.microbatches == a.microbatches);
  CHECK(b.stages == a.stages);
  REQUIRE(b.programs.size() == a.programs.size());
  for (std::size_t d = 0; d < a.programs.size(); ++d) {
    INFO("device " << d);
    REQUIRE(b.programs[d].size() == a.programs[d].size());
    for (std::size_t i = 0; i < a.programs[d].size(); ++i) {
      INFO("op " << i << ": " << octo::describe(a.programs[d][i]) << " vs "
                 << octo::describe(b.programs[d][i]));
      CHECK(b.programs[d][i] == a.programs[d][i]);
    }
  }
  CHECK(b == a);
}

std::vector<std::vector<TorchAction>> actions_of(const std::string& csv) {
  std::vector<std::vector<TorchAction>> out;
  for (const auto& row : octo::read_csv(csv, "x.csv")) {
    out.emplace_back();
    for (const auto& cell : row)
      for (const TorchAction& a : octo::parse_cell(cell.text, {"x.csv", cell.line, cell.column}))
        out.back().push_back(a);
  }
  return out;
}

bool is_compute(TorchActionType t) {
  return t == TorchActionType::F || t == TorchActionType::I || t == TorchActionType::W ||
         t == TorchActionType::B;
}

/// torch's _validate_schedule and the runtime's preconditions, restated: a stage on one rank; per
/// stage M forwards, I and W counts equal, B + I = M; B/I after F and W after I of the same
/// micro-batch; with comms, the receive of every cross-rank input before the compute using it and
/// every send after the compute producing it.
void check_torch_rules(const std::string& csv, int stages, int microbatches, bool comms) {
  const auto rows = actions_of(csv);
  std::map<int, int> rank_of;
  for (std::size_t r = 0; r < rows.size(); ++r)
    for (const TorchAction& a : rows[r]) {
      if (!is_compute(a.type)) continue;
      const auto [it, fresh] = rank_of.emplace(a.stage, static_cast<int>(r));
      CHECK(it->second == static_cast<int>(r));
    }
  REQUIRE(static_cast<int>(rank_of.size()) == stages);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    std::set<std::tuple<int, TorchActionType, int>> done;
    for (const TorchAction& a : rows[r]) {
      INFO("rank " << r << " " << octo::format_action(a));
      const int s = a.stage, m = a.mb;
      const auto seen = [&](int stage, TorchActionType t) { return done.contains({stage, t, m}); };
      if (a.type == TorchActionType::I || a.type == TorchActionType::B) CHECK(seen(s, TorchActionType::F));
      if (a.type == TorchActionType::W) CHECK(seen(s, TorchActionType::I));
      if (comms) {
        const bool prev_remote = s > 0 && rank_of[s - 1] != static_cast<int>(r);
        const bool next_remote = s + 1 < stages && rank_of[s + 1] != static_cast<int>(r);
        if (a.type == TorchActionType::F && prev_remote) CHECK(seen(s, TorchActionType::RecvF));
        if ((a.type == TorchActionType::I || a.type == TorchActionType::B) && next_remote)
          CHECK(seen(s, TorchActionType::RecvB));
        if (a.type == TorchActionType::SendF) CHECK(seen(s, TorchActionType::F));
        if (a.type == TorchActionType::SendB)
          CHECK((seen(s, TorchActionType::I) || seen(s, TorchActionType::B)));
      } else {
        CHECK(is_compute(a.type));
      }
      done.insert({s, a.type, m});
    }
  }
  std::map<std::pair<int, TorchActionType>, int> count;
  for (const auto& row : rows)
    for (const TorchAction& a : row) ++count[{a.stage, a.type}];
  for (int s = 0; s < stages; ++s) {
    INFO("stage " << s);
    CHECK(count[{s, TorchActionType::F}] == microbatches);
    CHECK(count[{s, TorchActionType::I}] == count[{s, TorchActionType::W}]);
    CHECK(count[{s, TorchActionType::B}] + count[{s, TorchActionType::I}] == microbatches);
  }
}

void check_round_trips(const Plan& plan) {
  INFO(plan.method);
  for (const bool comms : {false, true}) {
    INFO("comms " << comms);
    octo::TorchExportOptions o;
    o.comms = comms;
    const octo::TorchExport ex = octo::export_torch_schedule(plan, o);
    check_torch_rules(ex.csv, static_cast<int>(plan.stages.size()), plan.microbatches, comms);
    check_same_plan(plan, import(ex, plan));
  }
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("torch export: the shipped 1F1B plan, cell by cell") {
  const Plan plan = octo::load_plan(src("plans/tiny-hybrid.1f1b.cpu2.json"));
  const octo::TorchExport plain = octo::export_torch_schedule(plan);
  CHECK(plain.csv == "0F0,0F1,0B0,0F2,0B1,0F3,0B2,0B3\n1F0,1B0,1F1,1B1,1F2,1B2,1F3,1B3\n");
  octo::TorchExportOptions o;
  o.comms = true;
  const octo::TorchExport comms = octo::export_torch_schedule(plan, o);
  CHECK(comms.csv ==
        "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0F2,0SEND_F2,0RECV_B1,0B1,0F3,0SEND_F3,0RECV_B2,0RECV_B3,0B2,"
        "0B3\n"
        "1RECV_F0,1RECV_F1,1F0,1B0,1SEND_B0,1RECV_F2,1F1,1B1,1SEND_B1,1RECV_F3,1F2,1B2,1SEND_B2,1F3,1B3,"
        "1SEND_B3\n");
  CHECK(comms.stages["schedule_format"] == "compute_comms");
  CHECK(comms.stages["stage_to_rank"] == nlohmann::json::array({0, 1}));
  CHECK(comms.stages["stages"][1]["layers"] == nlohmann::json::array({5, 10}));
  CHECK(plain.stages["schedule_format"] == "compute_only");
}

TEST_CASE("torch export -> import is the identity on every baseline, with and without comms") {
  const octo::PlannerInputs tiny =
      inputs(src("profiles/models/tiny-hybrid.yaml"), src("profiles/clusters/cpu-local.yaml"), 2, 4);
  const octo::PlannerInputs nemo = inputs(src("profiles/models/nemotron-h-8b.yaml"), "", 4, 8);
  // Expert parallelism and ZeRO 1 travel with the stage file too.
  const octo::PlannerInputs experts =
      inputs(src("profiles/models/tiny-hybrid.yaml"), src("profiles/clusters/h100x8.yaml"), 2, 4, 4, 2, 1);
  REQUIRE(experts.cluster.ep == 2);
  REQUIRE(experts.cluster.zero == 1);
  int plans = 0;
  for (const octo::PlannerInputs* in : {&tiny, &nemo, &experts}) {
    for (const octo::BaselineRun& run : octo::run_baselines(*in)) {
      if (!run.plan) continue;
      check_round_trips(*run.plan);
      ++plans;
    }
  }
  CHECK(plans >= 27);  // every schedule runs on all three (a few chunk counts may not fit tiny-hybrid)
}

TEST_CASE("torch export -> import is the identity on tuned plans") {
  for (const auto& [model, cluster, pp, m] :
       {std::tuple{"profiles/models/tiny-hybrid.yaml", "profiles/clusters/cpu-local.yaml", 2, 4},
        std::tuple{"profiles/models/cpu-hybrid-m.yaml", "profiles/clusters/cpu-local.yaml", 2, 6}}) {
    const octo::PlannerInputs in = inputs(src(model), src(cluster), pp, m);
    octo::TuneOptions o;
    o.max_evaluations = 150;
    o.threads = 1;
    const octo::TuneResult r = octo::tune(in, o);
    check_round_trips(r.plan);
  }
}

TEST_CASE("torch export: recompute is refused, or stripped on request") {
  std::string yaml = octo::read_file(src("profiles/models/tiny-hybrid.yaml"));
  const auto at = yaml.find("recompute: none");
  REQUIRE(at != std::string::npos);
  yaml.replace(at, 15, "recompute: full");
  const octo::test::TempDir dir("interop");
  octo::BaselineOptions bo;
  bo.schedule = "1f1b";
  const Plan plan = octo::build_baseline(
      inputs(dir.write("recompute.yaml", yaml), src("profiles/clusters/cpu-local.yaml"), 2, 4), bo);

  const std::string e = error_of([&] { (void)octo::export_torch_schedule(plan); });
  CHECK(contains(e, "no recompute action"));
  CHECK(contains(e, "stages 0, 1"));
  CHECK(contains(e, "--strip-recompute"));

  octo::TorchExportOptions strip;
  strip.strip_recompute = true;
  const octo::TorchExport ex = octo::export_torch_schedule(plan, strip);
  CHECK(ex.stripped_recompute == std::vector<int>{0, 1});
  CHECK(ex.stages["stripped_recompute"] == nlohmann::json::array({0, 1}));
  CHECK(!contains(ex.csv, "R"));
  const Plan back = import(ex, plan);
  for (const octo::Stage& s : back.stages) CHECK(!s.recompute);
  std::size_t ops = 0, r_ops = 0;
  for (std::size_t d = 0; d < plan.programs.size(); ++d) {
    for (const octo::Op& op : plan.programs[d]) r_ops += op.kind == octo::OpKind::R ? 1 : 0;
    for (const octo::Op& op : back.programs[d]) ops += octo::is_comm(op.kind) ? 0 : 1;
  }
  std::size_t original = 0;
  for (const auto& p : plan.programs)
    for (const octo::Op& op : p) original += octo::is_comm(op.kind) ? 0 : 1;
  CHECK(ops == original - r_ops);
}

TEST_CASE("torch import: hand-written CSVs, with torch's optional forms") {
  const Plan plan = octo::load_plan(src("plans/tiny-hybrid.1f1b.cpu2.json"));
  const octo::CostProfile costs = costs_of(plan);
  Plan skeleton = octo::parse_torch_stages(octo::export_torch_schedule(plan).stages, "stages.json");
  // Quoted cells, empty cells (idle steps), \r\n line ends, FSDP/DP bookkeeping actions, and an
  // OVERLAP_F_B cell holding two actions: the same plan.
  const std::string csv =
      "0UNSHARD,\"0F0\",,0F1,0B0,(0F2;0B1)OVERLAP_F_B,0F3,0B2,0B3,0REDUCE_GRAD,0RESHARD\r\n"
      "1F0,1B0,,1F1,1B1,1F2,1B2,1F3,1B3\r\n";
  check_same_plan(plan, octo::import_torch_schedule(csv, "hand.csv", skeleton, costs));

  // Without a stage file: stage devices come from the CSV, micro-batches from its actions.
  Plan bare;
  bare.microbatches = 0;  // from the CSV
  bare.devices = 0;
  bare.method = plan.method;
  bare.stages = {octo::Stage{0, 5, -1, false}, octo::Stage{5, 10, -1, false}};
  bare.model_yaml = plan.model_yaml;
  bare.cluster_yaml = plan.cluster_yaml;
  bare.costs_yaml = plan.costs_yaml;
  bare.model_source = plan.model_source;
  bare.cluster_source = plan.cluster_source;
  bare.costs_source = plan.costs_source;
  bare.micro_batch = plan.micro_batch;
  bare.seq = plan.seq;
  bare.tp = plan.tp;
  bare.dp = plan.dp;
  check_same_plan(plan,
                  octo::import_torch_schedule(octo::export_torch_schedule(plan).csv, "x.csv", bare, costs));
}

TEST_CASE("torch import: errors name the cell") {
  const Plan plan = octo::load_plan(src("plans/tiny-hybrid.1f1b.cpu2.json"));
  const octo::CostProfile costs = costs_of(plan);
  const Plan skeleton = octo::parse_torch_stages(octo::export_torch_schedule(plan).stages, "stages.json");
  const auto err = [&](const std::string& csv) {
    return error_of([&] { (void)octo::import_torch_schedule(csv, "s.csv", skeleton, costs); });
  };
  const std::string good1 = "1F0,1B0,1F1,1B1,1F2,1B2,1F3,1B3\n";
  CHECK(contains(err("0F0,0X1\n" + good1), "s.csv:1:5: cell \"0X1\": unknown action type"));
  CHECK(contains(err("0F0,0F1x\n" + good1), "unexpected \"x\" after the action"));
  CHECK(contains(err("0F0,F1\n" + good1), "does not start with a stage index"));
  CHECK(contains(err("0F\n" + good1), "has no micro-batch"));
  CHECK(contains(err("5F0\n" + good1), "stage 5 out of range"));
  CHECK(contains(err("0F0,0F7\n" + good1), "micro-batch 7 out of range"));
  CHECK(contains(err("0F0\n0F1," + good1), "stage 0 runs on rank 1 here and on rank 0 above"));
  CHECK(contains(err("0F0,0RECV_F0\n" + good1), "stage 0 has no previous stage"));
  CHECK(contains(err("\"0F0\n" + good1), "unterminated quote"));
  CHECK(contains(err("0F0,0F1,0B0,0F2,0B1,0F3,0B2,0B3\n" + good1 + "\n"),
                 "3 rows, but the stage file describes 2"));
  // A missing forward: validation problems point to the cell.
  const std::string e = err("0F0,0F1,0B0,0F2,0B1,0B2,0B3\n" + good1);
  CHECK(contains(e, "not a valid plan"));
  CHECK(contains(e, "F mb3 s0 is missing"));
  // An op out of order: the problem points to its cell.
  const std::string order = err("0B0,0F0,0F1,0F2,0B1,0F3,0B2,0B3\n" + good1);
  INFO(order);
  CHECK(contains(order,
                 "s.csv:1:1: rank 0, cell \"0B0\": devices[0].ops[0] (BW mb0 s0): listed before F mb0 s0"));
  // Transfers given for some hand-offs but not others: the missing ones are named.
  const std::string partial =
      err("0F0,0SEND_F0,0F1,0B0,0F2,0B1,0F3,0B2,0B3\n1RECV_F0,1F0,1B0,1F1,1B1,1F2,1B2,1F3,1B3\n");
  CHECK(contains(partial, "not a valid plan"));
  // A compute order that cannot complete: rank 0 waits in B0 for rank 1, which waits in F1 for rank 0.
  const std::string cycle = err("0F0,0B0,0F1,0B1,0F2,0B2,0F3,0B3\n1F0,1F1,1B0,1B1,1F2,1B2,1F3,1B3\n");
  CHECK(contains(cycle, "s.csv: "));
  CHECK(contains(cycle, "cycle"));
}

TEST_CASE("torch stage file: read back, and located errors") {
  const Plan plan = octo::load_plan(src("plans/tiny-hybrid.zb-v.cpu2.json"));
  const nlohmann::json j = octo::export_torch_schedule(plan).stages;
  const Plan s = octo::parse_torch_stages(j, "st.json");
  CHECK(s.stages == plan.stages);
  CHECK(s.devices == plan.devices);
  CHECK(s.microbatches == plan.microbatches);
  CHECK(s.model_yaml == plan.model_yaml);
  CHECK(s.costs_yaml == plan.costs_yaml);
  CHECK(s.method == plan.method);

  nlohmann::json bad = j;
  bad["format"] = "nope";
  CHECK(contains(error_of([&] { (void)octo::parse_torch_stages(bad, "st.json"); }),
                 "st.json: format: \"nope\""));
  bad = j;
  bad["stages"][1]["layers"] = {3, 5, 7};
  CHECK(contains(error_of([&] { (void)octo::parse_torch_stages(bad, "st.json"); }),
                 "stages[1].layers: has 3 entries"));
  bad = j;
  bad["stage_to_rank"][2] = 0;
  CHECK(contains(error_of([&] { (void)octo::parse_torch_stages(bad, "st.json"); }), "stage_to_rank[2]"));
  bad = j;
  bad["colour"] = "blue";
  CHECK(contains(error_of([&] { (void)octo::parse_torch_stages(bad, "st.json"); }), "colour: unknown key"));
}
