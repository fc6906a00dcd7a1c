// qkv/text/placeholders.h - the parts of a software message a translation must carry over
// unchanged, kept behind numbered placeholders.
//
// Software-localisation MT (OpenNMT's ｟placeholders｠, the Bergamot/Marian tag handling, CAT tools'
// "non-translatables") masks printf conversions, command-line options, URLs, e-mail addresses and
// paths before translation and puts them back afterwards: a model then only has to copy ｟1｠, and
// a translated message never breaks its format string ("%-10s" turned into "% -10 s" makes printf
// read the wrong argument).
//
//   auto p = protect("cannot open '%s': use --force");   // "cannot open '｟1｠': use ｟2｠"
//   std::string de = restore("kann '｟1｠' nicht öffnen: ｟2｠ verwenden", p.originals);
//
// Training pairs mask a source span only where the same text stands in the target (protect_pair),
// so a translator's own change (a reordered "%1$s", a translated metavariable) is still learned.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace qkv::text {

enum class SpanKind { printf_conversion, long_option, short_option, url, email, path };
const char* span_kind_name(SpanKind k);

struct ProtectedSpan {
  size_t begin = 0, end = 0;  // byte range [begin, end) of the text
  SpanKind kind = SpanKind::printf_conversion;
};

// The spans to protect, in order and not overlapping (where two candidates overlap, the one that
// starts first wins, then the longer). The rules, each on ASCII:
//   printf conversion  %[n$][flags -+#0'][width n | * | *n$][.precision][length hh h ll l L q j z Z t]
//                      conversion [diouxXeEfFgGaAcCsSpnm], or %% ; also gettext's %<PRIdMAX> form;
//                      the space flag is left out ("100% sure" is no "% s")
//   long option        --name, name [A-Za-z0-9][A-Za-z0-9_-]* (not ending in -), at the start of a
//                      word (as for short options). Its argument is not part of it: translators
//                      keep the name and translate the metavariable (--max-lines=MAX-ZEILEN; 9 of
//                      findutils' 40 long options in the demo's test set)
//   short option       -x or -name (find's style), at the start of a word: after the text's start,
//                      white space or one of ( [ { " ' ` , and before white space or , . ; : ) ] } " ' ` =
//                      or the end; the name is ASCII letters/digits/_ with a letter first
//   url                (http|https|ftp|file)://... up to white space, without trailing . , ; : ! ? ) ] ' "
//   e-mail address     local@domain.tld (local [A-Za-z0-9._%+-]+, domain labels [A-Za-z0-9-]+ with a dot)
//   path               at the start of a word (as for options, also after =), / or ~/ followed by a
//                      name character, then [A-Za-z0-9._+-/]* without a trailing . , ; :
std::vector<ProtectedSpan> find_protected_spans(std::string_view text);

// "｟k｠" (U+FF5F, k in decimal, U+FF60), k from 1.
std::string placeholder(size_t k);

struct Protected {
  std::string text;                    // the input with each span replaced by its placeholder
  std::vector<std::string> originals;  // originals[k - 1] is the text behind placeholder k
};

// Every protected span of `text` becomes a placeholder, numbered in order. A text that already
// contains a placeholder character (U+FF5F or U+FF60) is left as it is (no originals), so that
// restore() cannot confuse the two.
Protected protect(std::string_view text);

// A training pair: the source's spans that also stand, as the same text, in the target become
// the same placeholder on both sides (each target occurrence used once, leftmost first); the rest
// stay as text. Numbered in source order.
std::pair<std::string, std::string> protect_pair(std::string_view source, std::string_view target);

// Replaces each placeholder ｟k｠ by originals[k - 1]. A placeholder the model made up (k out of
// range) is dropped; a lone ｟ or ｠ stays as text. Returns how many placeholders were dropped in
// *dropped when given.
std::string restore(std::string_view text, const std::vector<std::string>& originals, size_t* dropped = nullptr);

}  // namespace qkv::text
