#include "parallel/process_group.hpp"

#include "util/error_text.hpp"

#ifdef PRIVDIFF_WITH_GLOO
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef PRIVDIFF_WITH_NCCL
#ifndef USE_C10D_NCCL
#define USE_C10D_NCCL
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <ATen/ATen.h>

#include <cstdlib>
#include <functional>
#include <map>
#include <stdexcept>

namespace privdiff::core {

namespace {

std::optional<std::string> variable(const char* name) {
  const char* value = std::getenv(name);
  if (!value || !*value) return std::nullopt;
  return std::string(value);
}

int integer_variable(const char* name, int minimum, std::optional<int> fallback = std::nullopt, long maximum = 1 << 30) {
  const auto text = variable(name);
  if (!text) {
    if (fallback) return *fallback;
    throw std::invalid_argument(std::string(name) + " is not set (a multi-process run needs RANK, WORLD_SIZE, "
                                "MASTER_ADDR and MASTER_PORT, as torchrun sets them)");
  }
  std::size_t used = 0;
  long value = -1;
  try {
    value = std::stol(*text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text->size() || value < minimum || value > maximum) {
    throw std::invalid_argument(std::string(name) + "=" + *text + ": expected an integer in [" + std::to_string(minimum) +
                                ", " + std::to_string(maximum) + "]");
  }
  return static_cast<int>(value);
}

// The process group as the engine needs it. Held through two closures: LibTorch 1.13's
// ProcessGroupGloo is a c10d::ProcessGroup, 2.x's a c10d::Backend; both have these two calls.
class C10dCollective : public sdk::Collective {
 public:
  using AllReduce = std::function<void(std::vector<at::Tensor>&)>;
  using Broadcast = std::function<void(std::vector<at::Tensor>&, int root)>;

  C10dCollective(c10::intrusive_ptr<c10d::Store> store, AllReduce all_reduce, Broadcast broadcast, int rank,
                 int world, c10::Device device)
      : store_(std::move(store)), all_reduce_(std::move(all_reduce)), broadcast_(std::move(broadcast)),
        rank_(rank), world_(world), device_(device) {}

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }

  void all_reduce_sum(std::vector<at::Tensor>& tensors) override {
    // One collective per dtype: the tensors travel as one flat buffer, not one message each.
    std::map<at::ScalarType, std::vector<std::size_t>> by_type;
    for (std::size_t i = 0; i < tensors.size(); ++i) by_type[tensors[i].scalar_type()].push_back(i);
    for (const auto& [type, members] : by_type) {
      std::vector<at::Tensor> flat_parts;
      for (const auto i : members) flat_parts.push_back(tensors[i].reshape({-1}).to(device_));
      std::vector<at::Tensor> buffer{at::cat(flat_parts)};
      guarded("all-reduce", [&] { all_reduce_(buffer); });
      std::int64_t offset = 0;
      for (const auto i : members) {
        const std::int64_t n = tensors[i].numel();
        tensors[i].copy_(buffer[0].narrow(0, offset, n).view(tensors[i].sizes()));
        offset += n;
      }
    }
  }

  void broadcast(at::Tensor& tensor, int root) override {
    std::vector<at::Tensor> buffer{tensor.contiguous().to(device_)};
    guarded("broadcast", [&] { broadcast_(buffer, root); });
    if (!buffer[0].is_same(tensor)) tensor.copy_(buffer[0]);
  }

 private:
  template <typename F>
  void guarded(const char* what, F&& f) {
    try {
      f();
    } catch (const std::exception& e) {
      throw std::runtime_error("rank " + std::to_string(rank_) + " of " + std::to_string(world_) + ": " + what +
                               " failed, another rank stopped, crashed or hangs (" + first_line(e) + ")");
    }
  }

  c10::intrusive_ptr<c10d::Store> store_;
  AllReduce all_reduce_;
  Broadcast broadcast_;
  int rank_, world_;
  c10::Device device_;
};

template <typename Group>
std::unique_ptr<sdk::Collective> collective_over(c10::intrusive_ptr<c10d::Store> store, c10::intrusive_ptr<Group> group,
                                                 const ProcessPlace& place, c10::Device device,
                                                 std::chrono::milliseconds timeout) {
  auto all_reduce = [group, timeout](std::vector<at::Tensor>& tensors) { group->allreduce(tensors)->wait(timeout); };
  auto broadcast = [group, timeout](std::vector<at::Tensor>& tensors, int root) {
    c10d::BroadcastOptions options;
    options.rootRank = root;
    group->broadcast(tensors, options)->wait(timeout);
  };
  return std::make_unique<C10dCollective>(std::move(store), all_reduce, broadcast, place.rank, place.world_size,
                                          device);
}

}  // namespace

std::optional<ProcessPlace> process_place_from_environment() {
  if (!variable("WORLD_SIZE")) return std::nullopt;
  ProcessPlace p;
  p.world_size = integer_variable("WORLD_SIZE", 1);
  p.rank = integer_variable("RANK", 0);
  if (p.rank >= p.world_size) {
    throw std::invalid_argument("RANK=" + std::to_string(p.rank) + " is not below WORLD_SIZE=" +
                                std::to_string(p.world_size));
  }
  p.local_rank = integer_variable("LOCAL_RANK", 0, 0);
  p.local_world_size = integer_variable("LOCAL_WORLD_SIZE", 1, 1);
  p.master_addr = variable("MASTER_ADDR").value_or("");
  if (p.master_addr.empty()) throw std::invalid_argument("MASTER_ADDR is not set (where rank 0 listens)");
  p.master_port = integer_variable("MASTER_PORT", 1, std::nullopt, 65535);
  return p;
}

bool has_backend(const std::string& backend) {
#ifdef PRIVDIFF_WITH_GLOO
  if (backend == "gloo") return true;
#endif
#ifdef PRIVDIFF_WITH_NCCL
  if (backend == "nccl") return true;
#endif
  return false;
}

std::string choose_backend(const std::string& requested, const c10::Device& device) {
  std::string backend = requested;
  if (backend == "auto") backend = device.is_cuda() && has_backend("nccl") ? "nccl" : "gloo";
  if (!has_backend(backend)) {
    throw std::invalid_argument("[run] backend = \"" + backend + "\": this privdiff was built without it (" +
                                (backend == "gloo" ? "install libgloo-dev and rebuild"
                                                   : "needs a LibTorch with CUDA and NCCL") + ")");
  }
  if (backend == "nccl" && !device.is_cuda()) {
    throw std::invalid_argument("[run] backend = \"nccl\" needs [run] device = \"cuda\"; use \"gloo\" on the CPU");
  }
  return backend;
}

std::unique_ptr<sdk::Collective> connect_processes(const ProcessPlace& place, const std::string& requested,
                                                   const c10::Device& device, std::chrono::milliseconds timeout) {
  const std::string backend = choose_backend(requested, device);
  c10::intrusive_ptr<c10d::Store> store;
  try {
    c10d::TCPStoreOptions options;
    options.port = static_cast<std::uint16_t>(place.master_port);
    options.isServer = place.rank == 0;
    options.numWorkers = static_cast<std::size_t>(place.world_size);
    options.waitWorkers = true;
    options.timeout = timeout;
    store = c10::make_intrusive<c10d::TCPStore>(place.master_addr, options);
  } catch (const std::exception& e) {
    throw std::runtime_error("rank " + std::to_string(place.rank) + ": no rendezvous with the other " +
                             std::to_string(place.world_size - 1) + " rank(s) at " + place.master_addr + ":" +
                             std::to_string(place.master_port) + " (" + first_line(e) + ")");
  }
  try {
#ifdef PRIVDIFF_WITH_GLOO
  if (backend == "gloo") {
    auto options = c10d::ProcessGroupGloo::Options::create();
    options->timeout = timeout;
    const bool loopback = place.master_addr == "localhost" || place.master_addr.rfind("127.", 0) == 0;
    if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME")) {
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    } else if (loopback) {
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    } else {
      options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    }
    auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, place.rank, place.world_size, options);
    return collective_over(store, group, place, c10::Device(c10::kCPU), timeout);
  }
#endif
#ifdef PRIVDIFF_WITH_NCCL
  if (backend == "nccl") {
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout;
    auto group = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, place.rank, place.world_size, options);
    return collective_over(store, group, place, device, timeout);
  }
#endif
  } catch (const std::exception& e) {
    throw std::runtime_error("rank " + std::to_string(place.rank) + ": cannot connect the " + backend +
                             " process group (" + first_line(e) + ")");
  }
  throw std::logic_error("unreachable: backend " + backend);
}

}  // namespace privdiff::core
