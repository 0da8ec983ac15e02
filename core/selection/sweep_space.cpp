#include "selection/sweep_space.hpp"

#include <cmath>
#include <iomanip>
#include <sstream>
#include <stdexcept>

namespace privdiff::core {

namespace {

std::vector<std::string> split(const std::string& text, char by) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, by)) out.push_back(part);
  if (!text.empty() && text.back() == by) out.emplace_back();
  return out;
}

double positive_number(const std::string& text, const std::string& spec) {
  try {
    std::size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size() && v > 0 && std::isfinite(v)) return v;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("sweep parameter \"" + spec + "\": \"" + text + "\" is not a positive number (log:LOW:HIGH)");
}

}  // namespace

SweepParameter parse_sweep_parameter(const std::string& spec) {
  const auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
    throw std::invalid_argument("sweep parameter \"" + spec + "\": expected KEY=V1,V2,... or KEY=log:LOW:HIGH[:int]");
  }
  SweepParameter p;
  p.key = spec.substr(0, eq);
  const std::string rest = spec.substr(eq + 1);
  if (rest.rfind("log:", 0) == 0) {
    const auto parts = split(rest, ':');
    if (parts.size() < 3 || parts.size() > 4 || (parts.size() == 4 && parts[3] != "int")) {
      throw std::invalid_argument("sweep parameter \"" + spec + "\": a log-range is log:LOW:HIGH or log:LOW:HIGH:int");
    }
    p.low = positive_number(parts[1], spec);
    p.high = positive_number(parts[2], spec);
    p.integer = parts.size() == 4;
    if (!(p.low < p.high)) throw std::invalid_argument("sweep parameter \"" + spec + "\": LOW must be below HIGH");
    return p;
  }
  p.values = split(rest, ',');
  for (const auto& v : p.values) {
    if (v.empty()) throw std::invalid_argument("sweep parameter \"" + spec + "\": an empty value in the list");
  }
  return p;
}

std::string draw_sweep_value(const SweepParameter& p, std::mt19937_64& rng) {
  if (!p.values.empty()) {
    std::uniform_int_distribution<std::size_t> pick(0, p.values.size() - 1);
    return p.values[pick(rng)];
  }
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double v = std::exp(std::log(p.low) + unit(rng) * (std::log(p.high) - std::log(p.low)));
  if (p.integer) return std::to_string(std::llround(v));
  std::ostringstream out;
  out << std::setprecision(4) << v;
  return out.str();
}

}  // namespace privdiff::core
