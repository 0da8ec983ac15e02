#include <privdiff/privacy/event_json.hpp>

#include <privdiff/io/json_error.hpp>

#include <nlohmann/json.hpp>

#include <stdexcept>

namespace privdiff::sdk {

using nlohmann::json;

namespace {

json event_to_json(const PrivacyEvent& e) {
  switch (e.kind()) {
    case PrivacyEvent::Kind::no_op: return {{"type", "no_op"}};
    case PrivacyEvent::Kind::gaussian: return {{"type", "gaussian"}, {"noise_multiplier", e.noise_multiplier()}};
    case PrivacyEvent::Kind::poisson_sampled:
      return {{"type", "poisson_sampled"}, {"sampling_rate", e.sampling_rate()}, {"event", event_to_json(e.inner())}};
    case PrivacyEvent::Kind::self_composed:
      return {{"type", "self_composed"}, {"count", e.count()}, {"event", event_to_json(e.inner())}};
    case PrivacyEvent::Kind::composed: {
      json events = json::array();
      for (const auto& c : e.children()) events.push_back(event_to_json(c));
      return {{"type", "composed"}, {"events", events}};
    }
  }
  throw std::logic_error("unknown privacy event kind");
}

const json& field(const json& j, const char* name, const std::string& path) {
  if (!j.is_object() || !j.contains(name)) throw std::invalid_argument(path + ": missing \"" + name + "\"");
  return j.at(name);
}

double number(const json& j, const char* name, const std::string& path) {
  const json& v = field(j, name, path);
  if (!v.is_number()) throw std::invalid_argument(path + "." + name + ": expected a number");
  return v.get<double>();
}

PrivacyEvent event_from(const json& j, const std::string& path) {
  const json& type = field(j, "type", path);
  if (!type.is_string()) throw std::invalid_argument(path + ".type: expected a string");
  const std::string t = type.get<std::string>();
  try {
    if (t == "no_op") return PrivacyEvent::no_op();
    if (t == "gaussian") return PrivacyEvent::gaussian(number(j, "noise_multiplier", path));
    if (t == "poisson_sampled") {
      return PrivacyEvent::poisson_sampled(number(j, "sampling_rate", path),
                                           event_from(field(j, "event", path), path + ".event"));
    }
    if (t == "self_composed") {
      const json& count = field(j, "count", path);
      if (!count.is_number_integer()) throw std::invalid_argument(path + ".count: expected an integer");
      return PrivacyEvent::self_composed(event_from(field(j, "event", path), path + ".event"),
                                         count.get<std::int64_t>());
    }
    if (t == "composed") {
      const json& events = field(j, "events", path);
      if (!events.is_array()) throw std::invalid_argument(path + ".events: expected an array");
      std::vector<PrivacyEvent> parts;
      for (std::size_t i = 0; i < events.size(); ++i) {
        parts.push_back(event_from(events[i], path + ".events[" + std::to_string(i) + "]"));
      }
      return PrivacyEvent::composed(std::move(parts));
    }
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    if (what.rfind(path, 0) == 0) throw;
    throw std::invalid_argument(path + ": " + what);
  }
  throw std::invalid_argument(path + ".type: unknown privacy event type \"" + t + "\"");
}

// Parses `text` and reads it with `read`. Every JSON library error — a syntax error, a number out
// of range, a value of the wrong type — is bad input like the rest: std::invalid_argument, never
// another exception type (found by fuzz/ledger_json_fuzzer: "790e6111111" escaped as out_of_range).
template <class Read>
auto read_json(const std::string& text, const Read& read) {
  try {
    return read(json::parse(text));
  } catch (const json::exception& e) {
    throw std::invalid_argument(std::string("malformed JSON: ") + json_error_text(e));
  }
}

}  // namespace

std::string to_json(const PrivacyEvent& event) { return event_to_json(event).dump(); }

PrivacyEvent privacy_event_from_json(const std::string& text) {
  return read_json(text, [](const json& doc) { return event_from(doc, "$"); });
}

std::string to_json(const PrivacyLedger& ledger) {
  json entries = json::array();
  for (const auto& e : ledger.entries()) entries.push_back(event_to_json(e));
  return json{{"format", "privdiff-ledger"}, {"version", 1}, {"entries", entries}, {"caveats", ledger.caveats()}}.dump(2) +
         "\n";
}

namespace {

PrivacyLedger ledger_from(const json& doc) {
  if (!doc.is_object() || doc.value("format", "") != "privdiff-ledger") {
    throw std::invalid_argument("not a privdiff ledger (missing \"format\": \"privdiff-ledger\")");
  }
  // Compared as JSON: reading a huge or fractional number into an int is undefined behaviour.
  if (!doc.contains("version") || doc["version"] != json(1)) throw std::invalid_argument("unsupported ledger version");
  const std::string root = "$";  // named: a temporary argument makes GCC 13 warn of a dangling reference
  const json& entries = field(doc, "entries", root);
  if (!entries.is_array()) throw std::invalid_argument("$.entries: expected an array");
  PrivacyLedger ledger;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    PrivacyEvent e = event_from(entries[i], "$.entries[" + std::to_string(i) + "]");
    // Entries are replayed so the run-length form is rebuilt exactly.
    if (e.kind() == PrivacyEvent::Kind::self_composed && e.count() >= 1) {
      ledger.record(e.inner(), e.count());
    } else {
      ledger.record(e);
    }
  }
  if (doc.contains("caveats")) {  // absent in ledgers written before caveats existed
    const json& caveats = doc["caveats"];
    if (!caveats.is_array()) throw std::invalid_argument("$.caveats: expected an array of strings");
    for (std::size_t i = 0; i < caveats.size(); ++i) {
      if (!caveats[i].is_string()) throw std::invalid_argument("$.caveats[" + std::to_string(i) + "]: expected a string");
      ledger.add_caveat(caveats[i].get<std::string>());
    }
  }
  return ledger;
}
}  // namespace

PrivacyLedger privacy_ledger_from_json(const std::string& text) {
  return read_json(text, ledger_from);
}

}  // namespace privdiff::sdk
