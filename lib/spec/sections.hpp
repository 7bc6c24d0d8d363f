#pragma once
/// The YAML sections of a model: the dimensions of the layer kinds it uses, one value per kind.

#include <algorithm>
#include <any>
#include <utility>
#include <vector>

namespace octo {

/// One value per section type (AttentionSpec, MoeSpec, ..., each declared by its kind in
/// spec/kinds/), so that a kind reads and writes its own dimensions without the model naming
/// every kind. Copyable; a model holds a handful of sections, so lookups scan.
class Sections {
 public:
  /// The section of type S, or nullptr when the model has none.
  template <typename S>
  [[nodiscard]] const S* find() const {
    for (const std::any& v : values_)
      if (const S* s = std::any_cast<S>(&v)) return s;
    return nullptr;
  }
  template <typename S>
  [[nodiscard]] S* find() {
    for (std::any& v : values_)
      if (S* s = std::any_cast<S>(&v)) return s;
    return nullptr;
  }
  /// Sets (or replaces) the section of type S.
  template <typename S>
  S& set(S value) {
    if (S* s = find<S>()) return *s = std::move(value);
    return std::any_cast<S&>(values_.emplace_back(std::move(value)));
  }
  /// Removes the section of type S (if any).
  template <typename S>
  void erase() {
    std::erase_if(values_, [](const std::any& v) { return std::any_cast<S>(&v) != nullptr; });
  }

 private:
  std::vector<std::any> values_;
};

}  // namespace octo
