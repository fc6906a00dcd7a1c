#include "qkv/text/finetune_tokens.h"

#include "qkv/util/error.h"

namespace qkv::text {

void check_finetune_token_names(const FinetuneTokenNames& n, const std::string& where) {
  QKV_CHECK(!n.start.empty() && !n.delim.empty() && !n.extract.empty() && n.start != n.delim &&
                n.start != n.extract && n.delim != n.extract,
            where, "start, delim and extract must be three different non-empty tokens, got '", n.start, "', '",
            n.delim, "', '", n.extract, "'");
}

int add_finetune_tokens(Tokenizer& tok, const FinetuneTokenNames& n) {
  check_finetune_token_names(n, "add_finetune_tokens");
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
