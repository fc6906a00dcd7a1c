#include "qkv/text/finetune_tokens.h"

#include "qkv/util/error.h"

namespace qkv::text {

int add_finetune_tokens(Tokenizer& tok, const FinetuneTokenNames& n) {
  QKV_CHECK(!n.start.empty() && !n.delim.empty() && !n.extract.empty(), "add_finetune_tokens",
            "the [START], [DELIM] and [EXTRACT] tokens need non-empty names");
  QKV_CHECK(n.start != n.delim && n.start != n.extract && n.delim != n.extract, "add_finetune_tokens",
            "the start, delim and extract tokens must differ, got '", n.start, "', '", n.delim, "', '", n.extract,
            "'");
  const int32_t before = tok.vocab_size();
  tok.set_special(Role::Start, n.start);
  tok.set_special(Role::Delim, n.delim);
  tok.set_special(Role::Extract, n.extract);
  PostTemplate t;
  t.single = {{false, 0, n.start, 0}, {true, 0, "", 0}, {false, 0, n.extract, 0}};
  t.pair = {{false, 0, n.start, 0}, {true, 0, "", 0}, {false, 0, n.delim, 0}, {true, 1, "", 1}, {false, 0, n.extract, 1}};
  tok.set_template(t);
  return tok.vocab_size() - before;
}

}  // namespace qkv::text
