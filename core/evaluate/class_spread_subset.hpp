#pragma once
// `eval --max-samples N` of a set `privdiff sample` wrote: its balanced labels come in class order,
// so the first N images would hold only the first classes. The subset takes each class's first
// images in the class's share of the set instead.

#include <privdiff/components/evaluator.hpp>

#include <cstdint>

namespace privdiff::core {

/// `count` images of `set` (all of it when it holds no more): each class gives its first images,
/// about count × its share of the set (exactly count / classes each for a balanced set whose class
/// counts count divides), in the set's order. Deterministic; no labels are changed.
sdk::LabelledImages class_spread_subset(const sdk::LabelledImages& set, std::int64_t count);

}  // namespace privdiff::core
