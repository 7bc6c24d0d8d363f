#include "exec/training_loop.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "core/error.hpp"
#include "core/log.hpp"
#include "exec/agree.hpp"
#include "exec/checkpoint.hpp"
#include "exec/grad_norm.hpp"
#include "exec/report.hpp"
#include "exec/stop_signal.hpp"

namespace octo::exec {
namespace {

using nlohmann::json;

json plan_json(const ExecPlan& plan, const std::string& path) {
  const Plan& p = plan.plan;
  json stages = json::array();
  for (const Stage& s : p.stages) stages.push_back({s.first_layer, s.end_layer, s.device});
  return {{"file", path},
          {"method", p.method},
          {"devices", p.devices},
          {"tp", p.tp},
          {"dp", p.dp},
          {"ep", p.ep},
          {"zero", p.zero},
          {"microbatches", p.microbatches},
          {"micro_batch", p.micro_batch},
          {"seq", p.seq},
          {"stages", stages}};
}

json schedule_json(const nn::LrSchedule& s) {
  return {{"kind", nn::to_string(s.kind)},
          {"lr", s.lr},
          {"min_lr", s.min_lr},
          {"warmup_steps", s.warmup_steps},
          {"decay_steps", s.decay_steps}};
}

/// A float setting as the number the user wrote: its shortest decimal that reads back as the same
/// float (0.1f is recorded as 0.1, not as the double 0.10000000149011612 it widens to).
double as_written(float x) { return std::strtod(fmt::format("{}", x).c_str(), nullptr); }

}  // namespace

bool same_settings(const json& a, const json& b) {
  if (!a.is_object() || !b.is_object() || a.size() != b.size()) return a == b;
  for (const auto& [key, value] : a.items()) {
    const auto other = b.find(key);
    if (other == b.end()) return false;
    if (value.is_number_float() || other->is_number_float()) {
      if (!value.is_number() || !other->is_number()) return false;
      if (static_cast<float>(value.get<double>()) != static_cast<float>(other->get<double>())) return false;
    } else if (value != *other) {
      return false;
    }
  }
  return true;
}

namespace {

/// The optimizer's settings as a checkpoint records them (its step count is added by the manifest).
json optimizer_json(const nn::AdamWConfig& c, double clip_grad) {
  return {{"kind", "adamw"},
          {"beta1", as_written(c.beta1)},
          {"beta2", as_written(c.beta2)},
          {"eps", as_written(c.eps)},
          {"weight_decay", as_written(c.weight_decay)},
          {"clip_grad", clip_grad}};
}

std::string describe_plan(const json& p) {
  return fmt::format("{} ({}, {} device(s) x dp {} x tp {}, {} stages, {} micro-batches of {} x {})",
                     p.value("file", std::string("?")), p.value("method", std::string("?")),
                     p.value("devices", 0), p.value("dp", 0), p.value("tp", 1),
                     p.contains("stages") ? p["stages"].size() : 0, p.value("microbatches", 0),
                     p.value("micro_batch", 0), p.value("seq", 0));
}

}  // namespace

LoopOptions resolve_loop_options(LoopOptions o, double lr, std::int64_t steps) {
  o.schedule.lr = lr;
  if (o.schedule.decay_steps == 0) o.schedule.decay_steps = steps;
  o.schedule.validate();
  if (!(o.weight_decay >= 0) || !std::isfinite(o.weight_decay))
    fail("--weight-decay {}: expected a non-negative number", o.weight_decay);
  if (!(o.clip_grad >= 0) || !std::isfinite(o.clip_grad))
    fail("--clip-grad {}: expected a non-negative norm (0: no clipping)", o.clip_grad);
  if (o.val_every < 0)
    fail("--val-every {}: expected 0 (at the end only) or a positive number of steps", o.val_every);
  if (o.val_batches < 1) fail("--val-batches {}: expected at least 1", o.val_batches);
  if (o.save_every < 0)
    fail("--save-every {}: expected 0 (at the end only) or a positive number of steps", o.save_every);
  if (o.keep < 0) fail("--keep {}: expected 0 (keep all) or a positive number of checkpoints", o.keep);
  if (o.save_dir.empty() && (o.save_every > 0 || o.keep > 0))
    fail("--save-every / --keep: they need --save DIR (where to write the checkpoints)");
  return o;
}

TrainingLoop::TrainingLoop(Runtime& runtime, Comm& world, nn::Device& device, LoopOptions options,
                           LoopContext context)
    : runtime_(runtime),
      world_(world),
      device_(device),
      options_(std::move(options)),
      context_(std::move(context)),
      fingerprint_(model_fingerprint(runtime.plan().model, runtime.plan().plan.model_yaml)),
      states_(runtime) {}

TrainingLoop::~TrainingLoop() = default;

TrainingLoop::Resumed TrainingLoop::resume() {
  Resumed out;
  std::string error;
  ErrorKind kind = ErrorKind::Input;  // a checkpoint that does not load, unless it says otherwise
  std::optional<CheckpointManifest> manifest;
  try {
    if (!options_.load_path.empty()) {
      out.checkpoint = resolve_checkpoint(options_.load_path);
      manifest = read_manifest(out.checkpoint);
      load_checkpoint(out.checkpoint, *manifest, fingerprint_, runtime_.plan().model.layers.size(), states_);
      first_step_ = manifest->step;
      next_sample_ = manifest->next_sample;
    }
    if (world_.rank() == 0 && !options_.metrics_path.empty())
      metrics_ = std::make_unique<MetricsLog>(options_.metrics_path, first_step_);
  } catch (const Error& e) {
    error = e.what();
    kind = e.kind();
  } catch (const std::exception& e) {
    error = e.what();
  }
  // Every rank exits with the failing rank's kind: the others' "failed elsewhere" must not race it
  // to mpirun with another code.
  if (const auto failure = agree_on_failure(world_, error.empty() ? std::nullopt : std::optional(kind))) {
    out.failed = true;
    out.kind = failure->kind;
    if (failure->rank == world_.rank()) out.error = error;
    return out;
  }
  if (manifest && world_.rank() == 0) {
    const json now = plan_json(runtime_.plan(), context_.plan_path);
    json then = manifest->plan;
    fmt::print("octorun: resuming from {}: step {}, sample {}, saved under plan {}\n", out.checkpoint,
               manifest->step, manifest->next_sample, describe_plan(then));
    then.erase("file");
    json now_cmp = now;
    now_cmp.erase("file");
    if (then != now_cmp) fmt::print("octorun: re-planned: continuing under {}\n", describe_plan(now));
    // A plan of other micro-batch counts, sizes or replicas trains on another global batch: the
    // learning rate tuned for the old one may not suit it (Megatron-LM users keep it fixed).
    const auto sequences = [](const json& p) {
      return p.value("microbatches", std::int64_t{0}) * p.value("micro_batch", std::int64_t{0}) *
             p.value("dp", std::int64_t{1});
    };
    if (const std::int64_t before = sequences(then), after = sequences(now); before > 0 && before != after)
      fmt::print(
          "octorun: note: the global batch changes from {} to {} sequences per step ({} x {} x dp {} then, "
          "{} x {} x dp {} now)\n",
          before, after, then.value("microbatches", 0), then.value("micro_batch", 0), then.value("dp", 1),
          now.value("microbatches", 0), now.value("micro_batch", 0), now.value("dp", 1));
    json saved_schedule = manifest->lr_schedule;
    saved_schedule.erase("last_lr");
    const json now_schedule = schedule_json(options_.schedule);
    if (!same_settings(saved_schedule, now_schedule))
      fmt::print(
          "octorun: note: the learning-rate schedule differs from the checkpoint's ({} now, {} then)\n",
          now_schedule.dump(), saved_schedule.dump());
    // The optimizer's settings come from this command line; say so when they are not the saved run's.
    json saved_optimizer = manifest->optimizer;
    saved_optimizer.erase("steps");
    const json now_optimizer = optimizer_json(runtime_.optimizer().config(), options_.clip_grad);
    if (!same_settings(saved_optimizer, now_optimizer))
      fmt::print("octorun: note: the optimizer settings differ from the checkpoint's ({} now, {} then)\n",
                 now_optimizer.dump(), saved_optimizer.dump());
    const json& d = manifest->data;
    if (d.value("tokens", std::uint64_t{0}) != context_.train->size() ||
        d.value("source", std::string()) != context_.train->source())
      fmt::print("octorun: note: the training data differs from the checkpoint's ({}, {} tokens then)\n",
                 d.value("source", std::string("?")), d.value("tokens", std::uint64_t{0}));
    std::fflush(stdout);
  }
  return out;
}

StepUpdate TrainingLoop::update(std::int64_t step) {
  StepUpdate u;
  u.lr = options_.schedule.at(step);
  const std::vector<GradPiece> pieces = grad_pieces(runtime_);
  u.grad_norm = global_grad_norm(pieces, device_, world_);
  if (u.skipped()) return u;  // a NaN or infinite gradient: no update (train() stops the run)
  u.clip_factor = clip_factor(u.grad_norm, options_.clip_grad);
  scale_grads(pieces, static_cast<float>(u.clip_factor), device_);
  runtime_.update(static_cast<float>(u.lr));
  return u;
}

double TrainingLoop::validate() {
  double sum = 0;
  const int batches = std::max(options_.val_batches, 1);
  for (int k = 0; k < batches; ++k)
    sum +=
        runtime_.evaluate(*context_.validation, static_cast<std::int64_t>(k) * runtime_.samples_per_step());
  return sum / batches;
}

StepOutcome TrainingLoop::finish(std::int64_t step, const StepStats& stats, const StepUpdate& update,
                                 double iteration_ms) {
  next_sample_ += runtime_.samples_per_step();
  StepOutcome out;
  const bool validate_now =
      context_.validation && ((options_.val_every > 0 && (step + 1) % options_.val_every == 0) || last(step));
  const bool holder = runtime_.owns_lm_head() && runtime_.replica() == 0 && runtime_.coords().tp == 0;
  if (validate_now) {
    const double v = validate();
    if (holder) out.val_loss = v;
  }
  if (!options_.metrics_path.empty()) {
    // The loss lives on the LM head's rank, the figures on every rank: rank 0 writes the line.
    constexpr float kNone = -std::numeric_limits<float>::infinity();
    std::array<float, 3> most = {holder ? static_cast<float>(stats.loss) : kNone,
                                 holder && out.val_loss ? static_cast<float>(*out.val_loss) : kNone,
                                 static_cast<float>(stats.pipeline_ms)};
    world_.all_reduce(most, ReduceOp::Max);
    float busy = static_cast<float>(stats.busy_ms);
    world_.all_reduce(std::span<float>(&busy, 1), ReduceOp::Sum);
    if (metrics_) {
      StepMetrics m;
      m.step = step;
      m.loss = most[0];
      if (validate_now) m.val_loss = most[1];
      m.lr = update.lr;
      m.grad_norm = update.grad_norm;
      const Plan& p = runtime_.plan().plan;
      m.tokens_per_s = static_cast<double>(runtime_.samples_per_step()) * static_cast<double>(p.seq) /
                       (iteration_ms / 1000.0);
      m.iteration_ms = iteration_ms;
      m.bubble = measured_bubble(busy, world_.size(), most[2]);
      try {
        metrics_->write(m);
      } catch (const Error& e) {
        metrics_error_ = fmt::format("{} at step {}; no metrics after it", e.what(), step);
        fmt::print(stderr, "octorun: warning: {} (the training goes on)\n", metrics_error_);
        std::fflush(stderr);
        metrics_.reset();
      }
    }
  }
  if (save_due(step)) out.saved = save(step, update.lr);
  return out;
}

std::string TrainingLoop::save_before(std::int64_t step) {
  // Step − 1 was trained here (not loaded) and finish() did not save it already.
  if (options_.save_dir.empty() || step <= first_step_ || save_due(step - 1)) return {};
  return save(step - 1, options_.schedule.at(step - 1));
}

int TrainingLoop::stop_requested() {
  float signal = static_cast<float>(stop_signal());
  world_.all_reduce(std::span<float>(&signal, 1), ReduceOp::Max);
  return static_cast<int>(signal);
}

std::string TrainingLoop::save_at_stop(std::int64_t step, double lr) {
  if (options_.save_dir.empty() || save_due(step)) return {};
  return save(step, lr);
}

std::string TrainingLoop::save(std::int64_t step, double lr) {
  const ExecPlan& plan = runtime_.plan();
  CheckpointManifest m;
  m.model_name = plan.model.name;
  m.model = fingerprint_;
  m.layers = plan.model.layers.size();
  m.step = step + 1;
  m.next_sample = next_sample_;
  m.seed = context_.seed;
  m.optimizer_steps = states_.optimizer_steps();
  m.optimizer = optimizer_json(runtime_.optimizer().config(), options_.clip_grad);
  m.lr_schedule = schedule_json(options_.schedule);
  m.lr_schedule["last_lr"] = lr;
  const nn::TokenData& d = *context_.train;
  m.data = {{"source", d.source()},
            {"format", d.format()},
            {"type", nn::to_string(d.type())},
            {"tokens", d.size()}};
  m.plan = plan_json(plan, context_.plan_path);
  for (std::size_t l = 0; l < m.layers; ++l)
    m.files.push_back({.layer = l, .label = plan.model.layers[l].label, .file = {}, .bytes = 0, .crc32 = 0});
  SaveFault fault;
  fault.kill_after_files =
      context_.fault.at_save && context_.fault.rank == world_.rank() && context_.fault.step == step;
  return save_checkpoint(options_.save_dir, std::move(m), states_, world_, options_.keep, fault);
}

}  // namespace octo::exec
