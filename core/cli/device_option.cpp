#include "cli/device_option.hpp"

#include "cli/commands.hpp"

#include <privdiff/engine/device.hpp>

namespace privdiff::core::cli {

void add_device_option(CLI::App& cmd, std::string& value) {
  cmd.add_option("--device", value, "auto (a GPU when there is one), cpu, cuda or cuda:N (default: " + value + ")");
}

c10::Device resolve_device_option(const std::string& command, const std::string& requested) {
  try {
    return sdk::engine::resolve_device(requested);
  } catch (const std::exception& e) {  // DeviceUnavailable or a malformed name
    throw UsageError(command + " --device: " + e.what());
  }
}

}  // namespace privdiff::core::cli
