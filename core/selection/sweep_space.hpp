#pragma once
// What `privdiff sweep` searches: recipe keys with a list of values or a log-range each, written
// as --param (or [sweep] space) specs, and one candidate's values drawn at random from them.

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace privdiff::core {

/// One searched key: "KEY=V1,V2,..." (a value drawn uniformly from the list) or
/// "KEY=log:LOW:HIGH" / "KEY=log:LOW:HIGH:int" (log-uniform on [LOW, HIGH], rounded for int).
struct SweepParameter {
  std::string key;                  ///< a recipe key as --set takes it, e.g. stage.2.lr
  std::vector<std::string> values;  ///< the list (empty for a log-range)
  double low = 0, high = 0;
  bool integer = false;
};

/// Parses one spec. Throws std::invalid_argument saying what is wrong with it.
SweepParameter parse_sweep_parameter(const std::string& spec);

/// A value of `p` for --set (KEY=VALUE's right side), drawn with `rng`.
std::string draw_sweep_value(const SweepParameter& p, std::mt19937_64& rng);

}  // namespace privdiff::core
