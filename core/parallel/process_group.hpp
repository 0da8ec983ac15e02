#pragma once
// The processes of a data-parallel run on LibTorch's c10d: where a process stands (torchrun's
// variables, which `privdiff run --nproc` sets for its children too) and the process group that
// implements sdk::Collective — Gloo on the CPU, NCCL on CUDA builds.

#include <privdiff/parallel/collective.hpp>

#include <c10/core/Device.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace privdiff::core {

struct ProcessPlace {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;        ///< on this machine (picks the GPU)
  int local_world_size = 1;  ///< processes on this machine (shares the CPU cores)
  std::string master_addr;   ///< where rank 0 serves the rendezvous store
  int master_port = 0;
};

/// RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT as torchrun (and
/// Slurm launchers that mimic it) set them; std::nullopt when WORLD_SIZE is unset. Throws
/// std::invalid_argument naming the variable that is missing or malformed.
std::optional<ProcessPlace> process_place_from_environment();

/// True when this LibTorch build has the backend ("gloo" or "nccl").
bool has_backend(const std::string& backend);

/// The backend [run] backend = `requested` means for a run on `device` ("auto" resolved). Throws
/// std::invalid_argument when this build lacks it or it does not fit the device.
std::string choose_backend(const std::string& requested, const c10::Device& device);

/// Meets the other ranks at master_addr:master_port (rank 0 serves the store) and returns the
/// process group. `backend`: "gloo", "nccl", or "auto" (NCCL for a CUDA device where built in,
/// else Gloo). A collective that waits longer than `timeout` (a rank died or hangs) throws
/// std::runtime_error naming this rank. Throws std::runtime_error when the rendezvous fails.
std::unique_ptr<sdk::Collective> connect_processes(const ProcessPlace& place, const std::string& backend,
                                                   const c10::Device& device, std::chrono::milliseconds timeout);

}  // namespace privdiff::core
