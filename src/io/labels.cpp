#include "qkv/io/labels.h"

#include <set>

#include "qkv/util/error.h"

namespace qkv::io {

void check_single_label(const nlohmann::json& config, const std::string& where) {
  if (!config.is_object() || !config.contains("problem_type") || config["problem_type"].is_null()) return;
  QKV_CHECK(config["problem_type"] == "single_label_classification", where, "field 'problem_type': ",
            config["problem_type"].dump(), " is not supported (expected \"single_label_classification\": one label "
            "per input, a softmax over the labels)");
}

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

QkvClassifierSection read_qkv_classifier(const nlohmann::json& config, const std::string& where,
                                         bool pooling_allowed) {
  QkvClassifierSection out;
  auto it = config.find("qkv_classifier");
  if (it == config.end()) return out;
  QKV_CHECK(it->is_object(), where, "field 'qkv_classifier': expected an object");
  for (auto& [k, v] : it->items()) {
    const std::string field = "field 'qkv_classifier." + k + "'";
    if (k == "pairs") {
      QKV_CHECK(v.is_boolean(), where, field, ": expected true or false, got ", v.dump());
      out.pairs = v.get<bool>();
      out.pairs_declared = true;
    } else if (k == "max_len") {
      QKV_CHECK(v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)), where,
                field, ": expected an integer, got ", v.dump());
      out.max_len = v.get<int64_t>();
    } else if (k == "pooling" && pooling_allowed) {
      QKV_CHECK(v.is_string(), where, field, ": expected \"pooler\" or \"mean\", got ", v.dump());
      out.pooling = v.get<std::string>();
    } else {
      fail(where, field, ": unknown key (expected pairs, max_len", pooling_allowed ? ", pooling)" : ")");
    }
  }
  return out;
}

}  // namespace qkv::io
