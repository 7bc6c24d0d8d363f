#pragma once
/// Seed layouts around a heavy last layer (an LM head several times a block), for one stage per
/// layer. The head's device can run the head only between the first micro-batch's forward through
/// every layer below it and the last one's backward, and every other device idles until the first
/// forward reaches its first layer. So the head's device also takes one run of consecutive layers,
/// starting a few layers up (their forwards fit before the head's first forward, their backwards
/// after its last backward), enough to bring it to the mean work per device; the other layers go
/// round the other devices in order, so each of them starts within a few layers. On 52 equal
/// blocks with an LM head of four blocks, w = 0, PP 8, 16 micro-batches: 361 ms against a bound of
/// 354 (every other seed and the local search from them: 399 ms).

#include <span>
#include <vector>

#include "tune/layout.hpp"

namespace octo {

/// The layer → device map with the head on the last device and its run starting at layer `first`:
/// the run takes layers while the device's work stays below the mean per device by at least half
/// the next layer's work. Empty where `first` is not below the last layer or the run would leave
/// another device without a layer. Throws octo::Error for fewer than 2 devices.
[[nodiscard]] std::vector<int> head_run_map(std::span<const double> layer_work, int devices, int first);

/// True where head runs are worth trying: at least 3 devices, more layers than devices, and a
/// last layer with at least twice the median layer's work.
[[nodiscard]] bool heavy_last_layer(std::span<const double> layer_work, int devices);

/// The layouts of head_run_map for every start 1 ... 2·devices that gives one.
[[nodiscard]] std::vector<Layout> head_run_layouts(std::span<const double> layer_work, int devices);

}  // namespace octo
