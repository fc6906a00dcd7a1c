// qkv/tasks/attention_view.h - the attention viewer's data from a model's real inference path
// (`qkv viz`, `qkv translate --attention FILE.html`; the page itself is viz/attention_page.h).
//
// The model runs one ordinary forward pass (eval mode, no grad, the fused attention kernel) with
// an attention::AttentionRecord on every MultiHeadAttention; the kernel keeps no weights, so the
// weights of the requested layers and heads are replayed from the queries and keys it saw
// (attention_weights, sdpa.h: bit-identical to the naive path). Relative-position layers keep
// their weights (no replay exists for them). ViewOptions::naive gives the naive path's weights
// instead: the references a test compares the replay with.
//
//   translation (Transformer): encoder self, decoder self (causal), cross; an RNN encoder-decoder:
//     its one attention (from Seq2Seq::cross_attention, no replay); the greedy decode of
//     the source, or a forced target; a positional panel for sinusoidal positions
//   GPT: causal self-attention over the prompt;  BERT: self-attention over [CLS] a [SEP] (b [SEP])
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "qkv/io/bert.h"
#include "qkv/io/gpt2.h"
#include "qkv/tasks/translator.h"
#include "qkv/viz/attention_page.h"

namespace qkv::tasks {

struct ViewOptions {
  std::vector<int64_t> layers, heads;  // which (model numbering); empty: all
  int64_t max_bytes = 64ll << 20;      // refuse a page whose size bound (attention_page.h) is larger
  // Tests' references instead of the replay (attention::AttentionRecord::Naive): the naive path's
  // weights on the same queries and keys (beside), or of a forward pass through the naive path (instead).
  attention::AttentionRecord::Naive naive = attention::AttentionRecord::Naive::none;
};

struct ViewInput {
  std::string text;                   // source sentence / prompt / BERT segment A
  std::optional<std::string> target;  // translation: forced target (else greedy decode)
  std::optional<std::string> pair;    // BERT: segment B
  // translation: the target as token ids y1 .. yn (a hypothesis of Translator::translate, e.g. a
  // beam search's); wins over `target`.
  std::optional<std::vector<int64_t>> target_ids;
  // translation: the source as the translation encoded it (Translations::src_ids: placeholders,
  // cut to the model's length); wins over encoding `text`, which stays the page's caption.
  std::optional<std::vector<int64_t>> source_ids;
};

// The page for one sentence (and its greedy translation, unless `target` is given).
viz::AttentionPage translation_attention_page(const Translator& t, const ViewInput& in, const ViewOptions& opt = {},
                                              const std::string& title = "");
viz::AttentionPage gpt_attention_page(const io::GptBundle& b, const ViewInput& in, const ViewOptions& opt = {},
                                      const std::string& title = "");
viz::AttentionPage bert_attention_page(const io::BertBundle& b, const ViewInput& in, const ViewOptions& opt = {},
                                       const std::string& title = "");

// "transformer" / "rnn" (translation), "gpt2", "bert": from DIR/config.json (errors name the file).
std::string detect_model_type(const std::string& model_dir);
// Loads the model in `model_dir` (any of the above), builds its page and writes it to `html`
// (atomically). Returns the bytes written.
int64_t write_attention_view(const std::string& model_dir, const ViewInput& in, const std::string& html,
                             const ViewOptions& opt = {});

// An axis label per token id: its decoded text (specials included) without surrounding spaces, or
// its vocabulary string where that leaves nothing (a token of spaces, or one that decodes to no
// text). Used by the attention pages and the PNG heatmaps.
std::vector<std::string> token_labels(const text::Tokenizer& tok, const std::vector<int64_t>& ids);

}  // namespace qkv::tasks
