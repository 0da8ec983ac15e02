#include <privdiff/plugin/registrar.hpp>

#include <stdexcept>

namespace privdiff::sdk {

namespace {
bool valid_id(const std::string& id) {
  if (id.empty() || !(id[0] >= 'a' && id[0] <= 'z')) return false;
  for (char c : id) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  }
  return true;
}
}  // namespace

void Registrar::add(ComponentRegistration registration) {
  const std::string what = to_string(registration.kind) + " '" + registration.id + "'";
  if (!valid_id(registration.id)) {
    throw std::invalid_argument(what + ": ids are lowercase letters, digits, '_' and '-', starting with a letter");
  }
  if (registration.description.empty()) throw std::invalid_argument(what + ": empty description");
  if (!registration.factory) throw std::invalid_argument(what + ": no factory");
  for (const auto& r : registrations_) {
    if (r.kind == registration.kind && r.id == registration.id) {
      throw std::invalid_argument(what + " registered twice by the same plugin");
    }
  }
  registrations_.push_back(std::move(registration));
}

}  // namespace privdiff::sdk
