// Protected spans and placeholders (text/placeholders.h). Expected spans are worked by hand from
// the rules: the printf grammar of C11 7.21.6.1 / POSIX fprintf (argument number, flags, width,
// precision, length modifier, conversion) and gettext's <PRI...> macros, getopt's long and short
// option syntax as --help texts print it, RFC 3986 URL schemes, RFC 5322's dot-atom addresses.
#include <gtest/gtest.h>

#include "qkv/text/placeholders.h"

using namespace qkv::text;

namespace {
// The protected spans' texts.
std::vector<std::string> spans(std::string_view s) {
  std::vector<std::string> out;
  for (const auto& sp : find_protected_spans(s)) out.emplace_back(s.substr(sp.begin, sp.end - sp.begin));
  return out;
}
using Strings = std::vector<std::string>;
}  // namespace

TEST(Placeholders, PrintfConversionsFollowTheCGrammar) {
  EXPECT_EQ(spans("%s: %d files, 100%% done"), (Strings{"%s", "%d", "%%"}));
  EXPECT_EQ(spans("%-10s|%+.3f|%#lx|%05lld|%'d"), (Strings{"%-10s", "%+.3f", "%#lx", "%05lld", "%'d"}));
  EXPECT_EQ(spans("%2$s before %1$s, width %*d, %.*s, %*3$d"), (Strings{"%2$s", "%1$s", "%*d", "%.*s", "%*3$d"}));
  EXPECT_EQ(spans("%zu %jd %hhx %Lf %td %m %C %S"), (Strings{"%zu", "%jd", "%hhx", "%Lf", "%td", "%m", "%C", "%S"}));
  EXPECT_EQ(spans("%<PRIuMAX> bytes, %10<PRId64>"), (Strings{"%<PRIuMAX>", "%10<PRId64>"}));
  // Not conversions: no conversion letter, an unknown one, a lone percent sign, the space flag
  // (left out on purpose: prose like "50% of" would read as "% o").
  EXPECT_EQ(spans("50% of %y and %5 and %<FOO>"), Strings{});
}

TEST(Placeholders, LongOptionsLeaveTheirArgumentAsText) {
  EXPECT_EQ(spans("  --max-lines=MAX-LINES  use at most"), (Strings{"--max-lines"}));
  EXPECT_EQ(spans("--color[=WHEN], --null-data, --help"), (Strings{"--color", "--null-data", "--help"}));
  EXPECT_EQ(spans("(see --files0-from)"), (Strings{"--files0-from"}));
  // "--" alone ends options; a dash run inside a word is not an option; a trailing dash is left out.
  EXPECT_EQ(spans("use -- to end, well--known, --foo-"), (Strings{"--foo"}));
}

TEST(Placeholders, ShortOptionsAtWordStartsOnly) {
  EXPECT_EQ(spans("-a, -R: see -name and -exec"), (Strings{"-a", "-R", "-name", "-exec"}));
  EXPECT_EQ(spans("'-f' or (-v)"), (Strings{"-f", "-v"}));
  // Inside words, before other characters, digits first, or a dash alone: not options.
  EXPECT_EQ(spans("read-only, x-y, -5, - a, -a/b"), Strings{});
}

TEST(Placeholders, UrlsAddressesAndPaths) {
  EXPECT_EQ(spans("See https://www.gnu.org/software/tar/."), (Strings{"https://www.gnu.org/software/tar/"}));
  EXPECT_EQ(spans("Report bugs to <bug-tar@gnu.org>."), (Strings{"bug-tar@gnu.org"}));
  EXPECT_EQ(spans("edit /etc/fstab, ~/.bashrc or --prefix=/usr/local;"),
            (Strings{"/etc/fstab", "~/.bashrc", "--prefix", "/usr/local"}));
  // Division, "and/or", a lone slash, an address without a dot in its domain: none.
  EXPECT_EQ(spans("a/b and/or 1/2, / alone, root@localhost"), Strings{});
}

TEST(Placeholders, OverlapsKeepTheEarliestThenLongest) {
  // The e-mail address starts before the path-like and option-like text inside it.
  EXPECT_EQ(spans("mail a.b-c@x.org"), (Strings{"a.b-c@x.org"}));
  // "%d" and "%d@x.org" start together: the longer, the address, is kept.
  const auto sp = find_protected_spans("%d@x.org");
  ASSERT_EQ(sp.size(), 1u);
  EXPECT_EQ(sp[0].end, 8u);
  EXPECT_EQ(sp[0].kind, SpanKind::email);
}

TEST(Placeholders, ProtectAndRestoreRoundTrip) {
  const std::string line = "cannot open '%s': use --force or see https://x.org/a.";
  Protected p = protect(line);
  EXPECT_EQ(p.text, "cannot open '" + placeholder(1) + "': use " + placeholder(2) + " or see " + placeholder(3) + ".");
  EXPECT_EQ(p.originals, (Strings{"%s", "--force", "https://x.org/a"}));
  EXPECT_EQ(restore(p.text, p.originals), line);
  EXPECT_EQ(placeholder(12), "\xEF\xBD\x9F" "12" "\xEF\xBD\xA0");
}

TEST(Placeholders, RestoreDropsMadeUpPlaceholdersAndKeepsLoneBrackets) {
  size_t dropped = 9;
  EXPECT_EQ(restore(placeholder(2) + " a " + placeholder(1) + placeholder(3), {"X", "Y"}, &dropped), "Y a X");
  EXPECT_EQ(dropped, 1u);
  const std::string lone = "\xEF\xBD\x9F" "x " "\xEF\xBD\x9F" " 7" "\xEF\xBD\xA0";
  EXPECT_EQ(restore(lone, {"X"}, &dropped), lone);
  EXPECT_EQ(dropped, 0u);
}

TEST(Placeholders, TextWithPlaceholderCharactersIsLeftAlone) {
  const std::string odd = "already " + placeholder(1) + " and %s";
  Protected p = protect(odd);
  EXPECT_EQ(p.text, odd);
  EXPECT_TRUE(p.originals.empty());
  EXPECT_EQ(protect_pair(odd, "%s").first, odd);
}

TEST(Placeholders, PairsMaskOnlyWhatTheTargetKeeps) {
  // --lines and --force stand in the German; the translator numbered the conversion (%1$s), so
  // %s stays as text on both sides and the model learns that change.
  auto [s, t] = protect_pair("--lines=MAX: %s, use --force", "--lines=ANZAHL: %1$s, --force verwenden");
  EXPECT_EQ(s, placeholder(1) + "=MAX: %s, use " + placeholder(2));
  EXPECT_EQ(t, placeholder(1) + "=ANZAHL: %1$s, " + placeholder(2) + " verwenden");
}

TEST(Placeholders, PairsNumberInSourceOrderAndUseEachTargetOccurrenceOnce) {
  // Reordered by the translator: the numbers follow the source.
  auto [s, t] = protect_pair("%s to %d", "%d nach %s");
  EXPECT_EQ(s, placeholder(1) + " to " + placeholder(2));
  EXPECT_EQ(t, placeholder(2) + " nach " + placeholder(1));
  // Two %s in the source, one in the target: the second stays as text.
  auto [s2, t2] = protect_pair("%s and %s", "%s und es");
  EXPECT_EQ(s2, placeholder(1) + " and %s");
  EXPECT_EQ(t2, placeholder(1) + " und es");
  // A span twice on both sides: each target occurrence is taken once, in order.
  auto [s3, t3] = protect_pair("--a=B or --a", "--a=B oder --a");
  EXPECT_EQ(s3, placeholder(1) + "=B or " + placeholder(2));
  EXPECT_EQ(t3, placeholder(1) + "=B oder " + placeholder(2));
}
