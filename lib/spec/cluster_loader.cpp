// Cluster YAML → ClusterSpec, and the ClusterSpec topology queries.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <optional>
#include <string_view>
#include <vector>

#include "core/embedded.hpp"
#include "core/units.hpp"
#include "spec/limits.hpp"
#include "spec/loader.hpp"
#include "spec/yaml_reader.hpp"

namespace octo {
namespace {

using yaml::MapReader;

LinkSpec parse_link(const MapReader& links, std::string_view key) {
  MapReader l = links.map(key, {"bandwidth_gbs", "latency_us"});
  LinkSpec link;
  link.bandwidth_gbs = l.number("bandwidth_gbs", kMinRate, 1e300, false);
  link.latency_us = l.number("latency_us", 0, 1e9, false);
  return link;
}

DeviceKind parse_device(const MapReader& top) {
  MapReader d =
      top.map("device", {"name", "memory_gib", "peak_tflops", "memory_bandwidth_gbs", "efficiency"});
  DeviceKind kind;
  kind.name = d.string("name");
  kind.memory_gib = d.number("memory_gib", kMinMemoryGib, kMaxMemoryGib, false);
  MapReader peak = d.map("peak_tflops", {"bf16", "fp32"});
  kind.peak_tflops_bf16 = peak.number("bf16", kMinRate, 1e300, false);
  kind.peak_tflops_fp32 = peak.number("fp32", kMinRate, 1e300, false);
  kind.memory_bandwidth_gbs = d.number("memory_bandwidth_gbs", kMinRate, 1e300, false);
  kind.efficiency = d.number_or("efficiency", kind.efficiency, kMinRate, 1, false);
  return kind;
}

ClusterSpec parse(std::string_view text, const std::string& source) {
  YAML::Node root = yaml::parse_document(
      text, source,
      "a cluster description: name, nodes, devices_per_node, nvlink_domain, device, links, parallel");
  MapReader top(root, source, "",
                {"name", "nodes", "devices_per_node", "nvlink_domain", "device", "links", "parallel"});
  ClusterSpec c;
  c.source = source;
  c.name = top.string("name");
  c.nodes = static_cast<int>(top.integer("nodes", 1, 1 << 20));
  c.devices_per_node = static_cast<int>(top.integer("devices_per_node", 1, 1 << 10));
  if (static_cast<std::int64_t>(c.nodes) * c.devices_per_node > (1 << 20))
    top.fail("nodes", "nodes * devices_per_node is too large", "at most 1048576 devices");
  c.nvlink_domain = static_cast<int>(top.integer_or("nvlink_domain", 0, 1, c.world()));
  if (c.nvlink_domain > 0 && c.nvlink_domain % c.devices_per_node != 0 &&
      c.devices_per_node % c.nvlink_domain != 0)
    top.fail("nvlink_domain",
             fmt::format("{} devices neither divide nor are a multiple of the {} devices of a node",
                         c.nvlink_domain, c.devices_per_node),
             "a divisor or a multiple of devices_per_node (default: the node)");
  c.device_kinds.push_back(parse_device(top));
  c.device_kind_of.assign(static_cast<std::size_t>(c.world()), 0);

  MapReader links = top.map("links", {"intra_node", "inter_node"});
  c.intra_node = parse_link(links, "intra_node");
  c.inter_node = parse_link(links, "inter_node");

  MapReader par = top.map("parallel", {"tp", "dp", "pp", "ep", "zero"});
  c.tp = static_cast<int>(par.integer_or("tp", 1, 1, c.world()));
  c.dp = static_cast<int>(par.integer_or("dp", 1, 1, c.world()));
  c.pp = static_cast<int>(par.integer_or("pp", 0, 1, c.world()));
  c.ep = static_cast<int>(par.integer_or("ep", 1, 1, c.world()));
  c.zero = static_cast<int>(par.integer_or("zero", 0, 0, 1));
  if (c.dp % c.ep != 0)
    par.fail("ep", fmt::format("{} does not divide dp {}", c.ep, c.dp),
             "an ep dividing parallel.dp (an expert group is ep consecutive data-parallel ranks)");
  const std::int64_t tp_dp = static_cast<std::int64_t>(c.tp) * c.dp;
  if (c.pp > 0) {
    if (tp_dp * c.pp > c.world())
      par.fail("pp", fmt::format("tp * dp * pp = {} exceeds the {} devices", tp_dp * c.pp, c.world()),
               fmt::format("tp * dp * pp <= nodes * devices_per_node = {}", c.world()));
  } else if (tp_dp > c.world() || c.world() % tp_dp != 0) {
    // The key to change: dp when it is set above 1 (tp 1, dp 3 on 8 devices), else tp.
    par.fail(par.has("dp") && c.dp > 1 ? "dp"
             : par.has("tp")           ? "tp"
                                       : "dp",
             fmt::format("tp * dp = {} does not divide the {} devices", tp_dp, c.world()),
             "tp * dp dividing nodes * devices_per_node, or an explicit parallel.pp");
  }
  return c;
}

}  // namespace

const DeviceKind& ClusterSpec::device(int rank) const {
  if (device_kinds.empty()) fail("cluster {}: no device kind defined", name);
  if (rank < 0 || rank >= world()) fail("cluster {}: rank {} out of range [0, {})", name, rank, world());
  const auto r = static_cast<std::size_t>(rank);
  const int kind = r < device_kind_of.size() ? device_kind_of[r] : 0;
  if (kind < 0 || static_cast<std::size_t>(kind) >= device_kinds.size())
    fail("cluster {}: rank {} has unknown device kind {}", name, rank, kind);
  return device_kinds[static_cast<std::size_t>(kind)];
}

int ClusterSpec::node_of_pipeline_device(int d) const {
  if (d < 0) fail("cluster {}: negative pipeline device {}", name, d);
  // Megatron's rank order (plan/rank_layout.hpp): pipeline device d runs ranks
  // [d*tp*dp, (d+1)*tp*dp); its first rank decides its node.
  return static_cast<int>(static_cast<std::int64_t>(d) * tp * dp / devices_per_node);
}

const LinkSpec& ClusterSpec::link(int a, int b) const {
  return link_between_ranks(static_cast<std::int64_t>(a) * tp * dp, static_cast<std::int64_t>(b) * tp * dp);
}

const LinkSpec& ClusterSpec::link_between_ranks(std::int64_t a, std::int64_t b) const {
  const std::int64_t domain = nvlink_domain_size();
  return a / domain == b / domain ? intra_node : inter_node;
}

const LinkSpec& ClusterSpec::group_link(int first_rank, int stride, int size) const {
  if (size <= 1) return intra_node;
  const std::int64_t last =
      static_cast<std::int64_t>(first_rank) + static_cast<std::int64_t>(stride) * (size - 1);
  return link_between_ranks(first_rank, last);
}

ClusterSpec parse_cluster(std::string_view yaml_text, const std::string& source) {
  try {
    return parse(yaml_text, source);
  } catch (const YAML::Exception& e) {
    throw InputError(yaml::location(source, e.mark), "", "invalid YAML: " + e.msg, "a cluster description");
  }
}

namespace {

/// The name a shipped cluster goes by in messages and in a plan: "<embedded h100-16x8.yaml>".
std::string embedded_source(std::string_view name) { return fmt::format("<embedded {}.yaml>", name); }

}  // namespace

ClusterText read_cluster_text(const std::string& arg) {
  std::error_code ec;
  if (!std::filesystem::exists(arg, ec))
    if (const std::optional<std::string_view> shipped = shipped_cluster_yaml(arg))
      return {std::string(*shipped), embedded_source(arg)};
  std::vector<std::string_view> names;
  for (const ShippedCluster& c : shipped_clusters()) names.push_back(c.name);
  return {yaml::read_input_file(arg, fmt::format("a cluster YAML file, or a shipped cluster by name: {}",
                                                 fmt::join(names, ", "))),
          arg};
}

ClusterSpec load_cluster(const std::string& arg) {
  const ClusterText text = read_cluster_text(arg);
  return parse_cluster(text.yaml, text.source);
}

ClusterSpec default_cluster() {
  return parse_cluster(default_cluster_yaml(), embedded_source(kDefaultCluster));
}

}  // namespace octo
