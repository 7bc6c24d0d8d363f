#include "plan/plan_inputs.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "cost/estimate.hpp"
#include "cost/profile_io.hpp"
#include "spec/loader.hpp"

namespace octo {
namespace {

/// Runs `parse` on an embedded document, relocating its errors into the plan file.
template <typename Parse>
auto parse_embedded(const std::string& source, const char* key, Parse&& parse) {
  const std::string document = embedded_document(key);
  try {
    return parse(fmt::format("{}: {}", source, document));
  } catch (const InputError& e) {
    throw e.in_document(source, document);
  }
}

}  // namespace

std::string embedded_document(const char* key) { return fmt::format("inputs.{} (embedded YAML)", key); }

ModelSpec embedded_model(const Plan& plan, const std::string& source) {
  if (plan.model_yaml.empty())
    throw InputError(SourceLocation{source}, "inputs.model.yaml", "empty: the plan embeds no model",
                     "the model YAML the plan was made from (make plans with octoplan)");
  return parse_embedded(source, "model",
                        [&](const std::string& name) { return parse_model(plan.model_yaml, name); });
}

PlanInputs embedded_inputs(const Plan& plan, const std::string& source) {
  PlanInputs in;
  in.model = embedded_model(plan, source);
  in.default_cluster = plan.cluster_yaml.empty();
  in.cluster = in.default_cluster ? default_cluster()
                                  : parse_embedded(source, "cluster", [&](const std::string& name) {
                                      return parse_cluster(plan.cluster_yaml, name);
                                    });
  in.estimated_costs = plan.costs_yaml.empty();
  if (in.estimated_costs) {
    EstimateOptions eo;
    eo.micro_batch = plan.micro_batch;
    eo.seq = plan.seq;
    eo.tp = plan.tp;
    in.costs = estimate_costs(in.model, in.cluster, eo);
  } else {
    in.costs = parse_embedded(source, "costs",
                              [&](const std::string& name) { return parse_costs(plan.costs_yaml, name); });
  }
  return in;
}

}  // namespace octo
