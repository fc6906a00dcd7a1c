#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdlib>
#include <string>

#include "cli.h"

namespace qkv::cli {

std::map<std::string, Command>& registry() {
  static std::map<std::string, Command> r;
  return r;
}

int usage_exit(CLI::App& app, const CLI::ParseError& error) {
  // CLI11 checks required options before it complains about arguments it did not recognise.
  const auto unexpected = app.remaining();
  if (dynamic_cast<const CLI::RequiredError*>(&error) && !unexpected.empty())
    return app.exit(CLI::ExtrasError(unexpected)) == 0 ? 0 : 2;
  return app.exit(error) == 0 ? 0 : 2;
}

namespace {

// A validator that accepts a finite number above `lo` (or at least `lo` when `inclusive`); `tag`
// follows the type in --help.
CLI::Validator finite_number_from(double lo, bool inclusive, const std::string& what, const std::string& tag) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        const bool ok = !text.empty() && end == text.c_str() + text.size() && std::isfinite(v) &&
                        (inclusive ? v >= lo : v > lo);
        return ok ? std::string() : "must be " + what + ", got '" + text + "'";
      },
      tag);
}

}  // namespace

const CLI::Validator& positive() {
  static const CLI::Validator v = finite_number_from(0, false, "a positive number", "POSITIVE");
  return v;
}

const CLI::Validator& seed_value() {
  static const CLI::Validator v(
      [](std::string& text) -> std::string {
        const bool digits = !text.empty() && text.size() <= 20 &&
                            text.find_first_not_of("0123456789") == std::string::npos;
        // 20 digits fit from 0 to 18446744073709551615: compare as text past 19 digits.
        const bool fits = digits && (text.size() < 20 || text <= "18446744073709551615");
        return fits ? std::string() : "must be an integer in [0, 18446744073709551615], got '" + text + "'";
      },
      "SEED");
  return v;
}

const CLI::Validator& non_negative() {
  static const CLI::Validator v = finite_number_from(0, true, "0 or a positive number", "NONNEGATIVE");
  return v;
}

}  // namespace qkv::cli
