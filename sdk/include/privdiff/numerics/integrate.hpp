#pragma once
/// @file
/// Adaptive Gauss-Kronrod (7/15) quadrature for smooth integrands on finite intervals.

#include <privdiff/sdk_api.hpp>

#include <functional>

namespace privdiff::sdk::numerics {

/// Integral of f over [a, b], splitting the interval with the largest error estimate until the
/// total error estimate is below rel_tolerance * |integral| (or abs_tolerance), starting from
/// `initial_pieces` equal pieces (use more for integrands with narrow features).
PRIVDIFF_SDK_API double integrate(const std::function<double(double)>& f, double a, double b,
                                  double rel_tolerance = 1e-13, double abs_tolerance = 0, int initial_pieces = 16,
                                  int max_pieces = 20000);

}  // namespace privdiff::sdk::numerics
