#include "qkv/io/labels.h"

#include <set>

#include "qkv/util/error.h"

namespace qkv::io {

std::vector<std::string> read_id2label(const nlohmann::json& config, const std::string& where, const char* what,
                                       size_t min_labels) {
  auto it = config.find("id2label");
  QKV_CHECK(it != config.end() && it->is_object() && it->size() >= min_labels, where, "field 'id2label': ", what,
            " needs its labels, at least ", min_labels, " ({\"0\": \"name\", \"1\": ...})");
  std::vector<std::string> labels(it->size());
  std::vector<bool> seen(it->size(), false);
  std::set<std::string> names;
  for (auto& [key, value] : it->items()) {
    size_t id = labels.size();
    try {
      size_t used = 0;
      const long v = std::stol(key, &used);
      if (used == key.size() && v >= 0) id = size_t(v);
    } catch (const std::exception&) {
    }
    QKV_CHECK(id < labels.size() && !seen[id], where, "field 'id2label': key '", key, "' is not one of \"0\" .. \"",
              labels.size() - 1, "\" (each once)");
    QKV_CHECK(value.is_string() && !value.get<std::string>().empty(), where, "field 'id2label.", key,
              "': expected a non-empty label name, got ", value.dump());
    QKV_CHECK(names.insert(value.get<std::string>()).second, where, "field 'id2label': label '",
              value.get<std::string>(), "' appears twice");
    labels[id] = value.get<std::string>();
    seen[id] = true;
  }
  return labels;
}

}  // namespace qkv::io
