#include <privdiff/engine/gaussian_noise.hpp>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <sys/random.h>
#include <vector>

namespace privdiff::sdk::engine {

namespace {

void os_random_bytes(void* buffer, std::size_t size) {
  auto* out = static_cast<unsigned char*>(buffer);
  while (size > 0) {
    const ssize_t n = ::getrandom(out, size, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("secure noise: getrandom failed: ") + std::strerror(errno));
    }
    out += n;
    size -= static_cast<std::size_t>(n);
  }
}

// Standard normals from the OS CSPRNG by Box-Muller on 53-bit uniforms in (0, 1).
std::vector<double> secure_standard_normals(std::size_t n) {
  std::vector<std::uint64_t> bits(n + (n & 1));
  os_random_bytes(bits.data(), bits.size() * sizeof(std::uint64_t));
  std::vector<double> out(bits.size());
  for (std::size_t i = 0; i < bits.size(); i += 2) {
    const double u1 = (static_cast<double>(bits[i] >> 11) + 0.5) / 9007199254740992.0;
    const double u2 = (static_cast<double>(bits[i + 1] >> 11) + 0.5) / 9007199254740992.0;
    const double r = std::sqrt(-2 * std::log(u1));
    out[i] = r * std::cos(2 * M_PI * u2);
    out[i + 1] = r * std::sin(2 * M_PI * u2);
  }
  out.resize(n);
  return out;
}

}  // namespace

GaussianNoise GaussianNoise::seeded(std::uint64_t seed) {
  return GaussianNoise(at::make_generator<at::CPUGeneratorImpl>(seed));
}

GaussianNoise GaussianNoise::secure() { return GaussianNoise(std::nullopt); }

at::Tensor GaussianNoise::state() const {
  if (!generator_) throw std::logic_error("secure noise has no generator state");
  return generator_->get_state();
}

void GaussianNoise::set_state(const at::Tensor& state) {
  if (!generator_) throw std::logic_error("secure noise has no generator state");
  generator_->set_state(state);
}

at::Tensor GaussianNoise::sample(const at::Tensor& like, double std) {
  const auto cpu_double = at::TensorOptions().dtype(at::kDouble);
  at::Tensor z;
  if (generator_) {
    z = at::normal(0.0, 1.0, like.sizes(), *generator_, cpu_double);
  } else {
    const auto n = static_cast<std::size_t>(like.numel());
    const std::vector<double> a = secure_standard_normals(4 * n);
    z = at::empty(like.sizes(), cpu_double);
    double* dst = z.data_ptr<double>();
    for (std::size_t i = 0; i < n; ++i) dst[i] = (a[4 * i] + a[4 * i + 1] + a[4 * i + 2] + a[4 * i + 3]) / 2;
  }
  return (z * std).to(like.options().requires_grad(false));
}

}  // namespace privdiff::sdk::engine
