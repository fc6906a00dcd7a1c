#include "cli.h"

namespace qkv::cli {
std::map<std::string, Command>& registry() {
  static std::map<std::string, Command> r;
  return r;
}
}  // namespace qkv::cli
