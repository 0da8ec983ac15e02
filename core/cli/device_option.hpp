#pragma once
// --device for the commands that compute (sample, eval): "auto", "cpu", "cuda" or "cuda:N".

#include <c10/core/Device.h>

#include <string>

namespace CLI {
class App;
}

namespace privdiff::core::cli {

/// Adds --device to `cmd`, stored in `value` (keep its default "auto" or the caller's).
void add_device_option(CLI::App& cmd, std::string& value);

/// `requested` as a device of this machine; a UsageError (exit 2) naming `command` when it is not
/// one (e.g. "cuda" on a machine or a LibTorch without CUDA): never a silent CPU run.
c10::Device resolve_device_option(const std::string& command, const std::string& requested);

}  // namespace privdiff::core::cli
