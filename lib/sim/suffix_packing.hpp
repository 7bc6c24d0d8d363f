#pragma once
/// Layers as one-machine jobs on the device that holds them (the `layer_suffix` term of the
/// any-plan bound, sim/lower_bound.hpp). Under the simulator's semantics every F and B portion of
/// layer l — the part of a stage's F or B op that is layer l's, whichever stage holds it — lies in
/// [release[l], T − tail[l]], with release[l] = Σ_{l'<l} f (the forward of the layers below it
/// precedes it) and tail[l] = Σ_{l'<l} b + w_0 (the backward of the layers below it, then W of layer
/// 0, follows it), and every W portion lies in [release[l], T]. Both never decrease with l, so on a
/// device the binding sets of Jackson's one-machine bound are its layers from some l* up: for every
/// layer l* it holds, release[l*] + tail[l*] + Σ_{l >= l*} fb[l] <= T and release[l*] + Σ_{l >= l*}
/// all[l] <= T, and with its lowest layer a also the op overheads of its F and B ops (which all lie
/// in [release[a], T − tail[a]]). Where no assignment of the layers to the devices meets every
/// condition, no plan finishes by T.

#include <cstdint>
#include <span>

#include "sim/packing.hpp"

namespace octo {

struct SuffixLayers {
  std::span<const double> release;  ///< per layer: Σ of the forward times below it
  std::span<const double> tail;     ///< per layer: Σ of the backward times below it + w of layer 0
  std::span<const double> fb;       ///< per layer: its F + B work over all micro-batches
  std::span<const double> all;      ///< per layer: its F + B + W work over all micro-batches
  double device_fixed = 0;          ///< the F and B op overheads of a used device (2 m o)
};

/// Can the layers be assigned to at most `devices` devices so that every condition holds by `T`?
/// A depth-first search from the highest layer down (each assignment checks the new lowest layer's
/// conditions exactly; devices in the same state are interchangeable; volume prune) for at most
/// `node_limit` nodes: Unknown where it gives up (callers treat it as feasible). Throws octo::Error
/// for spans of different lengths.
[[nodiscard]] Packing suffix_pack(const SuffixLayers& layers, int devices, double T,
                                  std::int64_t node_limit = kPackingNodeLimit);

/// The smallest T >= lo not proven infeasible by suffix_pack (a lower bound on every plan's
/// iteration time on at most `devices` devices), searched up to min(cap, what one device surely
/// meets); lo when lo is not proven infeasible.
[[nodiscard]] double suffix_packing_bound(const SuffixLayers& layers, int devices, double lo, double cap,
                                          std::int64_t node_limit = kPackingNodeLimit);

}  // namespace octo
