#include "exec/runtime.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <optional>
#include <thread>

#include "core/error.hpp"
#include "core/log.hpp"
#include "plan/plan_io.hpp"
#include "plan/semantics.hpp"
#include "sim/check.hpp"
#include "spec/limits.hpp"

namespace octo::exec {
namespace {

using Clock = std::chrono::steady_clock;

double us_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

int parse_int(const std::string& text, const std::string& whole) {
  try {
    std::size_t used = 0;
    const int v = std::stoi(text, &used);
    if (used == text.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  fail(
      "OCTO_EXEC_FAULT={}: '{}' is not a non-negative integer (expected throw|kill:RANK:OP[:STEP], "
      "kill:RANK:OP:STEP:DELAY_MS or kill:RANK:save:STEP)",
      whole, text);
}

}  // namespace

// ---- plan preparation -----------------------------------------------------------------------

ExecPlan prepare_plan(Plan plan, std::string source, int world_size) {
  if (plan.devices <= 0 || plan.dp <= 0 || plan.tp <= 0)
    fail("{}: the plan has {} pipeline devices, dp {} and tp {} (expected positive sizes)", source,
         plan.devices, plan.dp, plan.tp);
  // In 64 bits: devices x dp x tp of an edited plan can pass 2^31 (it wrapped to "run mpirun -np 0").
  const std::int64_t needed = static_cast<std::int64_t>(plan.devices) * plan.dp * plan.tp;
  if (needed > kMaxInputInteger)
    fail("{}: the plan has {} pipeline devices x dp {} x tp {} = {} ranks (expected at most {})", source,
         plan.devices, plan.dp, plan.tp, needed, kMaxInputInteger);
  if (world_size != needed)
    fail_usage(
        "{}: world size {} does not match the plan: {} pipeline device{} x dp {} x tp {} = {} rank{} (run "
        "mpirun -np {})",
        source, world_size, plan.devices, plan.devices == 1 ? "" : "s", plan.dp, plan.tp, needed,
        needed == 1 ? "" : "s", needed);
  // The one check of `octoplan check`: inputs, structure, byte counts, deadlock freedom, prediction,
  // memory and the executor's limits, so octorun runs exactly the plans it accepts.
  const CheckResult check = check_plan(plan, source);
  if (check.inputs_ok && check.structure_ok && !check.deadlock_free)
    fail("{}: refusing to run a plan that cannot complete: {}", source, check.deadlock);
  require_ok(check);
  for (const std::string& note : check.notes) log::warn("exec", "{}: {}", source, note);

  ExecPlan out;
  out.model = check.inputs->model;
  const std::int64_t seq = plan.seq > 0 ? plan.seq : out.model.seq_len;
  out.model.seq_len = seq;
  out.model.training.micro_batch = plan.micro_batch;
  out.model.training.microbatches = plan.microbatches;
  out.plan = std::move(plan);
  out.plan.seq = seq;
  out.source = std::move(source);
  return out;
}

ExecPlan load_exec_plan(const std::string& path, int world_size) {
  LoadOptions options;  // prepare_plan checks, after the world-size check
  options.validate = false;
  options.check_deadlock = false;
  return prepare_plan(load_plan(path, options), path, world_size);
}

FaultInjection FaultInjection::parse(const std::string& text) {
  FaultInjection f;
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t colon = text.find(':', start);
    parts.push_back(text.substr(start, colon == std::string::npos ? std::string::npos : colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (parts.size() < 3 || parts.size() > 5 || (parts[0] != "throw" && parts[0] != "kill") ||
      (parts.size() == 5 && (parts[0] != "kill" || parts[2] == "save")))
    fail(
        "OCTO_EXEC_FAULT={}: expected throw|kill:RANK:OP[:STEP], kill:RANK:OP:STEP:DELAY_MS or "
        "kill:RANK:save:STEP",
        text);
  f.kind = parts[0] == "throw" ? Kind::Throw : Kind::Kill;
  f.rank = parse_int(parts[1], text);
  if (parts[2] == "save") {
    if (f.kind != Kind::Kill || parts.size() != 4)
      fail("OCTO_EXEC_FAULT={}: expected kill:RANK:save:STEP", text);
    f.at_save = true;
    f.op = -1;
    f.step = parse_int(parts[3], text);
    return f;
  }
  f.op = parse_int(parts[2], text);
  f.step = parts.size() >= 4 ? parse_int(parts[3], text) : 0;
  f.delay_ms = parts.size() == 5 ? parse_int(parts[4], text) : 0;
  return f;
}

// ---- runtime --------------------------------------------------------------------------------

/// What one step keeps between ops. Tensors are keyed by (producer stage, micro-batch).
struct Runtime::StepState {
  std::int64_t step = 0;
  const std::vector<Op>* program = nullptr;
  bool eval = false;  ///< forward only (evaluate()): contexts end after F
  int microbatches = 0;
  Clock::time_point t0;
  std::vector<nn::MicroBatch> batches;
  float loss_scale = 1;
  double loss_sum = 0;
  bool has_loss = false;

  std::vector<std::optional<nn::StageContext>> contexts;  ///< by key(stage, mb)
  /// Tensors produced here: for a stage on this device (local hand-off) or for the next SEND.
  std::vector<nn::Buffer> produced[2];  ///< by TensorKind, key(producer, mb)
  struct Incoming {
    Request request;
    nn::Buffer buffer;
    int op = -1;  ///< program position of the RECV
    bool posted = false;
    bool arrived = false;
  };
  std::vector<Incoming> incoming[2];  ///< by TensorKind, key(producer, mb)
  struct Outgoing {
    Request request;
    nn::Buffer buffer;
    int op = -1;
  };
  std::vector<Outgoing> sends;
  std::vector<std::pair<int, int>> pending_recvs;  ///< (kind, key) posted, not yet arrived

  StepStats stats;

  [[nodiscard]] int key(int stage, int mb) const { return stage * microbatches + mb; }
  [[nodiscard]] double now_us() const { return us_between(t0, Clock::now()); }
};

Runtime::Runtime(const ExecPlan& plan, Comm& world, nn::Device& device, const nn::TokenData& data,
                 const RuntimeOptions& options)
    : plan_(plan),
      world_(world),
      device_(device),
      data_(data),
      options_(options),
      layout_(plan.plan.devices, plan.plan.tp, plan.plan.dp, plan.plan.ep) {
  const Plan& p = plan_.plan;
  if (world.size() != plan_.world_size())
    fail("{}: world size {} does not match the plan ({} devices x dp {} x tp {})", plan_.source, world.size(),
         p.devices, p.dp, p.tp);
  rank_ = world.rank();
  coords_ = layout_.coords(rank_);
  device_index_ = coords_.pp;
  replica_ = coords_.dp;
  const int last_tag = tag(plan_.stages() - 1, p.microbatches - 1, TensorKind::Gradient);
  if (last_tag > world.max_tag())
    fail("{}: {} stages x {} micro-batches need tags up to {}, beyond the transport's limit {}", plan_.source,
         plan_.stages(), p.microbatches, last_tag, world.max_tag());
  // Every rank makes every split, in the same order (each is collective over the world); the key
  // is the world rank, which orders each group as plan/rank_layout.hpp documents.
  const auto split = [&](GroupKind kind) {
    std::unique_ptr<Comm> c = world.split(layout_.color(kind, rank_), rank_);
    c->set_label(layout_.describe(kind, rank_));
    return c;
  };
  pipeline_ = split(GroupKind::Pipeline);
  dp_group_ = split(GroupKind::Data);
  expert_dp_group_ = split(GroupKind::ExpertData);
  tp_group_ =
      std::make_unique<CommGroup>(split(GroupKind::Tensor), layout_.describe(GroupKind::Tensor, rank_));
  ep_group_ =
      std::make_unique<CommGroup>(split(GroupKind::Expert), layout_.describe(GroupKind::Expert, rank_));
  shard_group_ = world.split(coords_.pp * (p.dp / p.ep) + coords_.ep_block, rank_);
  shard_group_->set_label(fmt::format("tensor x expert group of rank {}", rank_));
  nn::LayerGroups groups{p.tp > 1 ? tp_group_.get() : nullptr, p.ep > 1 ? ep_group_.get() : nullptr};

  local_of_stage_.assign(p.stages.size(), -1);
  for (std::size_t s = 0; s < p.stages.size(); ++s) {
    const Stage& st = p.stages[s];
    if (st.device != device_index_) continue;
    local_of_stage_[s] = static_cast<int>(nets_.size());
    nets_.push_back(std::make_unique<nn::StageNet>(plan_.model, static_cast<std::size_t>(st.first_layer),
                                                   static_cast<std::size_t>(st.end_layer), options_.seed,
                                                   device_, groups));
    // Stages are built in model order: a tied LM head later on this rank uses this embedding.
    if (nets_.back()->has_embedding()) groups.embedding = nets_.back()->layers().front().get();
  }
  const std::vector<nn::Layer*> mine = layers();
  tied_ = std::make_unique<TiedGradients>(plan_.model, mine, p.stages.front().device, p.stages.back().device,
                                          *pipeline_);
  sync_ = std::make_unique<GradientSync>(mine, *dp_group_, *expert_dp_group_, p.zero, device_);
  optimizer_ = std::make_unique<nn::AdamW>(device_, options_.optimizer);
  if (sync_->sharded()) {
    for (const GradRun& run : sync_->runs()) optimizer_->add(run.layer->params(), run.own_begin, run.own_end);
  } else {
    for (nn::Layer* layer : mine) optimizer_->add(layer->params());
  }
  for (const Op& op : p.programs[static_cast<std::size_t>(device_index_)])
    if (op.kind == OpKind::F ||
        ((op.kind == OpKind::Send || op.kind == OpKind::Recv) && op.tensor == TensorKind::Activation))
      eval_program_.push_back(op);
  log::debug("exec",
             "rank {} = device {}, data-parallel rank {}, tensor rank {}: {} stage(s), {} parameters, {} ops "
             "per step",
             rank_, device_index_, replica_, coords_.tp, nets_.size(), param_count(),
             p.programs[static_cast<std::size_t>(device_index_)].size());
}

Runtime::~Runtime() = default;

Comm& Runtime::group(GroupKind kind) {
  switch (kind) {
    case GroupKind::Tensor:
      return tp_group_->comm();
    case GroupKind::Data:
      return *dp_group_;
    case GroupKind::Pipeline:
      return *pipeline_;
    case GroupKind::Expert:
      return ep_group_->comm();
    case GroupKind::ExpertData:
      return *expert_dp_group_;
  }
  fail("unknown group kind");
}

nn::ShardPos Runtime::shard_pos() const {
  return {.tp_size = plan_.plan.tp, .tp_rank = coords_.tp, .ep_size = plan_.plan.ep, .ep_rank = coords_.ep};
}

int Runtime::tag(int stage, int mb, TensorKind kind) const {
  return ((stage * plan_.plan.microbatches + mb) << 1) | (kind == TensorKind::Gradient ? 1 : 0);
}

bool Runtime::owns_lm_head() const { return local_of_stage_.back() >= 0; }

std::vector<nn::Layer*> Runtime::layers() {
  std::vector<nn::Layer*> out;
  for (auto& net : nets_)
    for (auto& l : net->layers()) out.push_back(l.get());
  return out;
}

std::size_t Runtime::param_count() const {
  std::size_t n = 0;
  for (const auto& net : nets_) n += net->param_count();
  return n;
}

nn::StageNet& Runtime::net(int stage) {
  const int local = local_of_stage_[static_cast<std::size_t>(stage)];
  if (local < 0) fail("stage {} is not on device {}", stage, device_index_);
  return *nets_[static_cast<std::size_t>(local)];
}

nn::Buffer Runtime::take_input(StepState& st, int producer, int mb, TensorKind kind) {
  const int k = st.key(producer, mb);
  const auto t = static_cast<std::size_t>(kind);
  const Stage& from = plan_.plan.stages[static_cast<std::size_t>(producer)];
  if (from.device == device_index_) {
    nn::Buffer b = std::move(st.produced[t][static_cast<std::size_t>(k)]);
    if (b.empty())
      fail("the {} of stage {} micro-batch {} was not produced on this device before its use",
           to_string(kind), producer, mb);
    return b;
  }
  auto& in = st.incoming[t][static_cast<std::size_t>(k)];
  if (!in.posted)
    fail("the {} of stage {} micro-batch {} has no RECV posted before its use", to_string(kind), producer,
         mb);
  if (!in.arrived) {
    const auto before = Clock::now();
    try {
      in.request.wait();
    } catch (const Error& e) {
      const auto& op = (*st.program)[static_cast<std::size_t>(in.op)];
      fail("waiting for {} (op {}): {}", describe(op), in.op, e.what());
    }
    const auto after = Clock::now();
    st.stats.wait_ms += us_to_ms(us_between(before, after));
    in.arrived = true;
    st.stats.spans[static_cast<std::size_t>(in.op)].end_us = us_between(st.t0, after);
  }
  in.posted = false;
  return std::move(in.buffer);
}

void Runtime::hand_off(StepState& st, int producer, int mb, TensorKind kind, nn::Buffer tensor) {
  st.produced[static_cast<std::size_t>(kind)][static_cast<std::size_t>(st.key(producer, mb))] =
      std::move(tensor);
}

void Runtime::progress(StepState& st) {
  // Testing requests drives the transport (MPI progresses inside its calls) and frees send
  // buffers as early as possible.
  for (std::size_t i = 0; i < st.sends.size();) {
    if (st.sends[i].request.test()) {
      st.stats.spans[static_cast<std::size_t>(st.sends[i].op)].end_us = st.now_us();
      st.sends[i] = std::move(st.sends.back());
      st.sends.pop_back();
    } else {
      ++i;
    }
  }
  for (std::size_t i = 0; i < st.pending_recvs.size();) {
    auto [t, k] = st.pending_recvs[i];
    auto& in = st.incoming[static_cast<std::size_t>(t)][static_cast<std::size_t>(k)];
    if (!in.posted || in.arrived || in.request.test()) {
      if (in.posted && !in.arrived) {
        in.arrived = true;
        st.stats.spans[static_cast<std::size_t>(in.op)].end_us = st.now_us();
      }
      st.pending_recvs[i] = st.pending_recvs.back();
      st.pending_recvs.pop_back();
    } else {
      ++i;
    }
  }
}

void Runtime::run_op(StepState& st, std::size_t index) {
  const Op& op = (*st.program)[index];
  const Plan& p = plan_.plan;
  SpanUs& span = st.stats.spans[index];

  if (!st.eval && options_.fault.kind != FaultInjection::Kind::None && options_.fault.rank == rank_ &&
      options_.fault.step == st.step && options_.fault.op == static_cast<int>(index)) {
    if (options_.fault.kind == FaultInjection::Kind::Kill) {
      log::warn("exec", "fault injection: killing rank {} at op {}{}", rank_, index,
                options_.fault.delay_ms > 0 ? fmt::format(" in {} ms", options_.fault.delay_ms) : "");
      // The delay lets the peers reach the collective they share with this rank first, so that
      // what they report waiting for does not depend on how fast mpirun reacts (tests).
      std::this_thread::sleep_for(std::chrono::milliseconds(options_.fault.delay_ms));
      std::raise(SIGKILL);
    }
    fail("fault injection (OCTO_EXEC_FAULT)");
  }

  switch (op.kind) {
    case OpKind::Recv: {
      const auto t = static_cast<std::size_t>(op.tensor);
      const int k = st.key(op.stage, op.mb);
      auto& in = st.incoming[t][static_cast<std::size_t>(k)];
      if (in.posted) fail("a second RECV of the same tensor");
      const std::size_t n =
          net(consumer_stage(op.tensor, op.stage)).boundary_elements(p.micro_batch, static_cast<int>(p.seq));
      span.start_us = st.now_us();
      in.buffer = device_.alloc<float>(n);
      in.request =
          pipeline_->irecv(std::span<float>(in.buffer.data(), n), op.peer, tag(op.stage, op.mb, op.tensor));
      in.op = static_cast<int>(index);
      in.posted = true;
      in.arrived = false;
      span.end_us = span.start_us;
      st.pending_recvs.emplace_back(static_cast<int>(t), k);
      return;
    }
    case OpKind::Send: {
      nn::Buffer b = std::move(st.produced[static_cast<std::size_t>(op.tensor)]
                                          [static_cast<std::size_t>(st.key(op.stage, op.mb))]);
      if (b.empty()) fail("nothing to send: the producer has not run on this device");
      span.start_us = st.now_us();
      span.end_us = span.start_us;
      Request r = pipeline_->isend(std::span<const float>(b.data(), b.size()), op.peer,
                                   tag(op.stage, op.mb, op.tensor));
      st.sends.push_back({std::move(r), std::move(b), static_cast<int>(index)});
      return;
    }
    default:
      break;
  }

  nn::StageNet& stage_net = net(op.stage);
  const Stage& stage = p.stages[static_cast<std::size_t>(op.stage)];
  const auto k = static_cast<std::size_t>(st.key(op.stage, op.mb));
  auto& ctx = st.contexts[k];
  const auto tensor_done = [&](nn::Buffer out, TensorKind kind) {
    hand_off(st, op.stage, op.mb, kind, std::move(out));
  };
  // The boundary tensors this op takes from and makes for a neighbour stage (plan/semantics.hpp).
  const std::optional<Need> input_from = input_tensor(op.kind, op.stage, plan_.stages());
  const std::optional<TensorKind> output = output_tensor(op.kind, op.stage, plan_.stages());

  switch (op.kind) {
    case OpKind::F: {
      nn::Buffer input;
      if (input_from) input = take_input(st, input_from->stage, op.mb, input_from->tensor);
      span.start_us = st.now_us();
      ctx.emplace(stage_net.make_context(st.batches[static_cast<std::size_t>(op.mb)], st.loss_scale));
      nn::Buffer out = stage_net.forward(*ctx, std::move(input), !st.eval && !stage.recompute);
      if (st.eval) ctx.reset();  // no backward follows
      if (output) {
        tensor_done(std::move(out), *output);
      } else {  // the LM head's forward ends in the loss
        st.loss_sum += nn::read_scalar(device_, out.data());
        st.has_loss = true;
      }
      break;
    }
    case OpKind::R:
      if (!ctx) fail("recompute before forward");
      span.start_us = st.now_us();
      stage_net.recompute(*ctx);
      break;
    case OpKind::B:
    case OpKind::BW: {
      if (!ctx) fail("backward before forward");
      nn::Buffer grad;
      if (input_from) grad = take_input(st, input_from->stage, op.mb, input_from->tensor);
      span.start_us = st.now_us();
      nn::Buffer dx = op.kind == OpKind::B ? stage_net.backward_input(*ctx, std::move(grad))
                                           : stage_net.backward(*ctx, std::move(grad));
      if (op.kind == OpKind::BW) ctx.reset();
      if (output) tensor_done(std::move(dx), *output);
      break;
    }
    case OpKind::W:
      if (!ctx) fail("weight gradient before forward");
      span.start_us = st.now_us();
      stage_net.backward_weight(*ctx);
      ctx.reset();
      break;
    default:
      fail("unexpected op kind");
  }
  span.end_us = st.now_us();
  st.stats.busy_ms += us_to_ms(span.duration_us());
}

std::int64_t Runtime::samples_per_step() const { return sequences_per_step(plan_.plan); }

StepStats Runtime::step(std::int64_t index) { return step(index, index * samples_per_step()); }

StepStats Runtime::step(std::int64_t index, std::int64_t first_sample) {
  for (auto& net : nets_) net->zero_grads();
  return walk(index, first_sample, data_, false);
}

double Runtime::evaluate(const nn::TokenData& data, std::int64_t first_sample) {
  return walk(-1, first_sample, data, true).loss;
}

StepStats Runtime::walk(std::int64_t index, std::int64_t first_sample, const nn::TokenData& data, bool eval) {
  const Plan& p = plan_.plan;
  const auto& program = eval ? eval_program_ : p.programs[static_cast<std::size_t>(device_index_)];
  StepState st;
  st.step = index;
  st.program = &program;
  st.eval = eval;
  st.microbatches = p.microbatches;
  const auto keys = static_cast<std::size_t>(plan_.stages() * p.microbatches);
  st.contexts.resize(keys);
  for (int t = 0; t < 2; ++t) {
    st.produced[t].resize(keys);
    st.incoming[t].resize(keys);
  }
  st.stats.step = index;
  st.stats.spans.assign(program.size(), {});
  st.loss_scale = 1.0f / (static_cast<float>(p.microbatches) * static_cast<float>(p.dp) *
                          static_cast<float>(p.micro_batch) * static_cast<float>(p.seq));
  for (int m = 0; m < p.microbatches; ++m)
    st.batches.push_back(data.sequences(
        first_sample + (static_cast<std::int64_t>(replica_) * p.microbatches + m) * p.micro_batch,
        p.micro_batch, static_cast<int>(p.seq)));

  const auto fail_at = [&](const std::string& where, const std::exception& e) {
    fail("[rank {}] error at {} ({}, device {}, data-parallel rank {}, tensor rank {}): {}", rank_, where,
         eval ? std::string("validation") : fmt::format("step {}", index), device_index_, replica_,
         coords_.tp, e.what());
  };
  try {
    world_.barrier();  // a common time origin for the measured timeline
  } catch (const std::exception& e) {
    fail_at("the barrier starting the step", e);
  }
  device_.reset_peak();
  const std::size_t base_bytes = device_.bytes_in_use();
  st.t0 = Clock::now();

  for (std::size_t i = 0; i < program.size(); ++i) {
    try {
      run_op(st, i);
      const auto before = Clock::now();
      progress(st);
      st.stats.progress_ms += us_to_ms(us_between(before, Clock::now()));
    } catch (const std::exception& e) {
      fail_at(fmt::format("{} (op {})", describe(program[i]), i), e);
    }
  }
  const auto walked = Clock::now();
  try {
    for (auto& s : st.sends) {
      s.request.wait();
      st.stats.spans[static_cast<std::size_t>(s.op)].end_us = st.now_us();
    }
  } catch (const std::exception& e) {
    fail_at("the end of the op list (waiting for sends to complete)", e);
  }
  const auto sent = Clock::now();
  st.stats.wait_ms += us_to_ms(us_between(walked, sent));
  st.sends.clear();
  for (const auto& c : st.contexts)
    if (c) fail("[rank {}] internal error: a micro-batch context is still alive after the op list", rank_);
  for (int t = 0; t < 2; ++t)
    for (std::size_t k = 0; k < keys; ++k)
      if (!st.produced[t][k].empty() || st.incoming[t][k].posted)
        fail("[rank {}] internal error: a {} of stage {} micro-batch {} was never consumed", rank_,
             to_string(static_cast<TensorKind>(t)), k / static_cast<std::size_t>(p.microbatches),
             k % static_cast<std::size_t>(p.microbatches));
  st.stats.peak_activation_bytes =
      static_cast<std::int64_t>(device_.peak_bytes()) - static_cast<std::int64_t>(base_bytes);
  st.stats.start_bytes = static_cast<std::int64_t>(base_bytes);

  // Pipeline figures: the op walk ends with this rank's last op.
  double last_end = 0;
  for (const SpanUs& s : st.stats.spans) last_end = std::max(last_end, s.end_us);
  st.stats.pipeline_ms = us_to_ms(last_end);
  st.stats.ops = static_cast<int>(program.size());
  st.stats.overhead_ms =
      std::max(0.0, us_to_ms(us_between(st.t0, sent)) - st.stats.busy_ms - st.stats.wait_ms);
  log::debug(
      "exec",
      "step {}: busy {:.3f} ms, waits {:.3f} ms, overhead {:.3f} ms ({:.3f} ms testing transfers), {} ops",
      index, st.stats.busy_ms, st.stats.wait_ms, st.stats.overhead_ms, st.stats.progress_ms, st.stats.ops);

  try {
    const auto before = Clock::now();
    if (!eval) {
      tied_->reduce();
      sync_->reduce();
    }
    if (owns_lm_head()) {
      float loss = static_cast<float>(st.loss_sum);
      if (p.dp > 1) dp_group_->all_reduce(std::span<float>(&loss, 1));
      st.stats.loss = loss;
    }
    st.stats.allreduce_ms = us_to_ms(us_between(before, Clock::now()));
  } catch (const std::exception& e) {
    fail_at("the data-parallel gradient reduction", e);
  }
  st.stats.step_ms = us_to_ms(us_between(st.t0, Clock::now()));
  return std::move(st.stats);
}

void Runtime::update(float lr) {
  if (lr < 0) {
    optimizer_->step();
  } else {
    optimizer_->step(lr);
  }
  sync_->gather_values();
}

}  // namespace octo::exec
