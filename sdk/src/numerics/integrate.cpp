#include <privdiff/numerics/integrate.hpp>

#include <cmath>
#include <queue>
#include <vector>

namespace privdiff::sdk::numerics {

namespace {

// Kronrod 15-point nodes (abscissae >= 0) and weights, with the embedded Gauss 7-point weights.
constexpr double xk[8] = {0.991455371120812639206854697526329, 0.949107912342758524526189684047851,
                          0.864864423359769072789712788640926, 0.741531185599394439863864773280788,
                          0.586087235467691130294144845693013, 0.405845151377397166906606412076961,
                          0.207784955007898467600689403773245, 0.000000000000000000000000000000000};
constexpr double wk[8] = {0.022935322010529224963732008058970, 0.063092092629978553290700663189204,
                          0.104790010322250183839876322541518, 0.140653259715525918745189590510238,
                          0.169004726639267902826583426598550, 0.190350578064785409913256402421014,
                          0.204432940075298892414161999234649, 0.209482141084727828012999174891714};
constexpr double wg[4] = {0.129484966168869693270611432679082, 0.279705391489276667901467771423780,
                          0.381830050505118944950369775488975, 0.417959183673469387755102040816327};

struct Piece {
  double a, b, value, error;
  bool operator<(const Piece& o) const { return error < o.error; }
};

Piece gauss_kronrod(const std::function<double(double)>& f, double a, double b) {
  const double c = 0.5 * (a + b), h = 0.5 * (b - a);
  const double fc = f(c);
  double kronrod = wk[7] * fc, gauss = wg[3] * fc;
  for (int j = 0; j < 7; ++j) {
    const double sum = f(c - h * xk[j]) + f(c + h * xk[j]);
    kronrod += wk[j] * sum;
    if (j % 2 == 1) gauss += wg[j / 2] * sum;
  }
  return {a, b, kronrod * h, std::fabs((kronrod - gauss) * h)};
}

}  // namespace

double integrate(const std::function<double(double)>& f, double a, double b, double rel_tolerance,
                 double abs_tolerance, int initial_pieces, int max_pieces) {
  if (a == b) return 0;
  std::priority_queue<Piece> pieces;
  double total = 0, error = 0;
  for (int i = 0; i < initial_pieces; ++i) {
    const Piece p = gauss_kronrod(f, a + (b - a) * i / initial_pieces, a + (b - a) * (i + 1) / initial_pieces);
    total += p.value;
    error += p.error;
    pieces.push(p);
  }
  while (error > std::max(abs_tolerance, rel_tolerance * std::fabs(total)) &&
         static_cast<int>(pieces.size()) < max_pieces) {
    const Piece worst = pieces.top();
    pieces.pop();
    const double mid = 0.5 * (worst.a + worst.b);
    const Piece left = gauss_kronrod(f, worst.a, mid), right = gauss_kronrod(f, mid, worst.b);
    total += left.value + right.value - worst.value;
    error += left.error + right.error - worst.error;
    pieces.push(left);
    pieces.push(right);
  }
  // Re-add the pieces to avoid drift from the running updates.
  total = 0;
  while (!pieces.empty()) {
    total += pieces.top().value;
    pieces.pop();
  }
  return total;
}

}  // namespace privdiff::sdk::numerics
