#pragma once
/// Reading and writing plan files (JSON, versioned, self-contained).
///
/// Format (schema_version 1), keys in this order when written:
///   { "schema_version": 1, "generator": "...", "method": "...",
///     "inputs": { "model":   {"source": "...", "yaml": "..."},
///                 "cluster": {"source": "...", "yaml": "..."},
///                 "costs":   {"source": "...", "yaml": "..."} },
///     "parallel": {"devices": P, "tp": T, "dp": D, "ep": E, "zero": Z},   (plan/rank_layout.hpp)
///     "microbatches": M, "micro_batch": B, "seq": S,
///     "stages": [ {"layers": [first, end], "device": d, "recompute": false}, ... ],
///     "devices": [ {"device": 0, "ops": [
///         {"op": "F", "stage": 0, "mb": 3},
///         {"op": "SEND", "stage": 0, "mb": 3, "tensor": "act", "peer": 1, "bytes": 123}, ...]}, ...],
///     "allow_oversubscribed_memory": true,     (only when set)
///     "predicted": { ... } | null }            (plan/prediction.hpp)
/// Op kinds: F B W BW R SEND RECV; tensor: "act" | "grad". Required keys: schema_version,
/// parallel.devices, microbatches, stages, devices; the others default (tp = dp = ep = micro_batch = 1, zero
/// = 0, seq = 0, empty strings, allow_oversubscribed_memory = false, predicted = null). Unknown keys are
/// errors. JSON values are read with core/json_reader.hpp (located errors).

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/json_reader.hpp"
#include "plan/plan.hpp"
#include "plan/validate.hpp"

namespace octo {

/// The "inputs" object of a plan file: {"model": {"source", "yaml"}, "cluster": ..., "costs": ...}.
[[nodiscard]] nlohmann::json inputs_to_json(const Plan& plan);

/// Reads an "inputs" object (found at JSON path `path`) into the plan's input texts and sources.
void inputs_from_json(const JsonReader& reader, const nlohmann::json& inputs, const std::string& path,
                      Plan& plan);

/// The plan as a JSON value (the format above).
[[nodiscard]] nlohmann::json to_json(const Plan& plan);

/// The plan file text: indented, one op per line.
[[nodiscard]] std::string plan_to_string(const Plan& plan);

/// Converts a JSON value to a Plan, checking types, required/unknown keys, op kinds and the
/// schema version. Errors are octo::InputError "source: json.path: problem (expected ...)".
/// No semantic validation (see validate.hpp).
[[nodiscard]] Plan plan_from_json(const nlohmann::json& json, const std::string& source);

/// Writes plan_to_string(plan) with write_file_atomic.
void save_plan(const Plan& plan, const std::string& path);

struct LoadOptions {
  bool validate = true;        ///< run validate_plan (structure, op counts, order, comm matching)
  bool check_deadlock = true;  ///< run check_deadlock (needs validate)
  /// Passed to validate_plan; when model_layers is 0 it is taken from the embedded model YAML
  /// (if any), so the stages must cover exactly the model's layers.
  ValidateOptions validation;
};

/// Parses plan text; `source` names it in messages. JSON syntax errors carry line:column.
[[nodiscard]] Plan parse_plan(std::string_view text, const std::string& source,
                              const LoadOptions& options = {});

/// Reads, parses and (by default) validates and deadlock-checks a plan file. Throws octo::Error /
/// octo::InputError naming the file; a deadlocking plan is rejected with the cycle in the message.
/// The tools check plans with sim/check.hpp instead, which also re-derives what the embedded inputs
/// give (byte counts, prediction, memory).
[[nodiscard]] Plan load_plan(const std::string& path, const LoadOptions& options = {});

}  // namespace octo
