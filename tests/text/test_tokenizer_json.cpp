// tokenizer.json save/load round trips (GPT-2, BERT, word-level BPE, char, word), Hugging Face
// spellings, load_tokenizer() path kinds, and errors that name the file and field.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <sys/stat.h>

#include "qkv/text/bpe.h"
#include "qkv/text/bpe_train.h"
#include "qkv/text/char_word.h"
#include "qkv/text/pretokenize.h"
#include "qkv/text/tokenizer_json.h"
#include "qkv/text/wordpiece.h"
#include "qkv/util/error.h"
#include "text_fixtures.h"

using namespace qkv::text;
using namespace qkv::testing;

namespace {

std::string tmp(const std::string& name) { return scratch(name); }

// Saves, reloads, and checks the reloaded tokenizer gives the same ids on `text` line by line.
std::unique_ptr<Tokenizer> round_trip(const Tokenizer& tok, const std::string& name, const std::string& text) {
  std::string path = tmp(name);
  tok.save(path);
  auto back = load_tokenizer(path);
  EXPECT_EQ(back->kind(), tok.kind());
  EXPECT_EQ(back->vocab_size(), tok.vocab_size());
  EXPECT_EQ(back->added_tokens(), tok.added_tokens());
  EXPECT_EQ(back->special_tokens().tokens, tok.special_tokens().tokens);
  size_t bad = 0;
  for (auto& line : split_lines_keep_newline(text))
    if (back->encode(line) != tok.encode(line) && bad++ < 3) ADD_FAILURE() << "line '" << line << "'";
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(to_tokenizer_json(*back), to_tokenizer_json(tok));  // stable: save(load(x)) == x
  return back;
}

std::string expect_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const qkv::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no qkv::Error thrown";
  return "";
}

}  // namespace

TEST(TokenizerJson, Gpt2RoundTrip) {
  auto gpt2 = load_tokenizer(npm_cache() + "/gpt2");  // directory with encoder.json + vocab.bpe
  ASSERT_EQ(gpt2->kind(), "bytebpe");
  EXPECT_EQ(gpt2->vocab_size(), 50257);
  EXPECT_EQ(gpt2->require_special_id(Role::Eos), 50256);
  std::string text = slurp(test_text_path("gpt2_1mb.txt", 1100000, false)).substr(0, 300000);
  auto back = round_trip(*gpt2, "gpt2_tokenizer.json", text);
  EXPECT_EQ(dynamic_cast<BpeTokenizer&>(*back).merges(), dynamic_cast<BpeTokenizer&>(*gpt2).merges());
  auto ids = back->encode(text);
  EXPECT_EQ(back->decode(ids), text);
}

TEST(TokenizerJson, BertRoundTripKeepsNormalizerAndTemplate) {
  auto bert = load_tokenizer(npm_cache() + "/bert-base-uncased/vocab.txt");
  ASSERT_EQ(bert->kind(), "wordpiece");
  std::string text = slurp(test_text_path("bert_1mb.txt", 1100000, false)).substr(0, 300000);
  auto back = round_trip(*bert, "bert_tokenizer.json", text);
  Encoding a = bert->encode_pair("Who are you?", "I am here."), b = back->encode_pair("Who are you?", "I am here.");
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.type_ids, b.type_ids);
  EXPECT_EQ(a.ids.front(), 101);
  EXPECT_EQ(a.ids.back(), 102);
}

TEST(TokenizerJson, TrainedTokenizersRoundTrip) {
  std::string path = test_text_path("bpe_train_100k.txt", 100000, true);
  std::string text = slurp(path);
  BpeTrainOptions o;
  o.vocab_size = 800;
  auto bpe = train_bpe({path}, o);
  bpe->set_template(PostTemplate::bos_eos());
  round_trip(*bpe, "wordbpe_tokenizer.json", text);
  VocabBuildOptions vo;
  vo.max_size = 300;
  round_trip(*VocabTokenizer::build(VocabTokenizer::Level::Word, {path}, vo), "word_tokenizer.json", text);
  round_trip(*VocabTokenizer::build(VocabTokenizer::Level::Char, {path}, vo), "char_tokenizer.json", text);
}

TEST(TokenizerJson, ReadsHuggingFaceSpellings) {
  // Merges as "left right" strings, BertProcessing, no qkv role record.
  std::string j = R"({"version":"1.0","added_tokens":[
      {"id":0,"content":"[UNK]","special":true},{"id":1,"content":"[CLS]","special":true},
      {"id":2,"content":"[SEP]","special":true}],
    "normalizer":null,"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"ByteLevel",
      "add_prefix_space":false}]},
    "post_processor":{"type":"BertProcessing","sep":["[SEP]",2],"cls":["[CLS]",1]},
    "decoder":{"type":"ByteLevel"},
    "model":{"type":"BPE","unk_token":null,"vocab":{"[UNK]":0,"[CLS]":1,"[SEP]":2,"a":3,"b":4,"ab":5,
      "\u0120":6,"\u0120ab":7},"merges":["a b","\u0120 ab"]}})";
  // The byte-level alphabet must be complete: add the 256 symbols to the vocabulary.
  auto tok_err = expect_error([&] { from_tokenizer_json(j, "hf.json"); });
  EXPECT_NE(tok_err.find("byte"), std::string::npos) << tok_err;
  std::string full = j;
  std::string extra;
  int id = 8;
  for (int b = 0; b < 256; ++b) {
    std::string s = bytes_to_unicode_string(std::string(1, char(b)));
    if (s == "a" || s == "b" || s == "\xc4\xa0") continue;
    extra += ",\"" + (s == "\"" ? std::string("\\\"") : s == "\\" ? std::string("\\\\") : s) + "\":" + std::to_string(id++);
  }
  full.insert(full.find("},\"merges\""), extra);
  auto tok = from_tokenizer_json(full, "hf.json");
  EXPECT_EQ(tok->kind(), "bytebpe");
  EXPECT_EQ(tok->encode("ab ab"), (std::vector<int32_t>{5, 7}));
  EXPECT_EQ(tok->encode_single("ab").ids, (std::vector<int32_t>{1, 5, 2}));
  EXPECT_EQ(tok->encode_pair("ab", "ab").type_ids, (std::vector<int32_t>{0, 0, 0, 1, 1}));
  EXPECT_EQ(tok->require_special_id(Role::Cls), 1);
}

TEST(TokenizerJson, ErrorsNameFileAndField) {
  std::string missing = tmp("does_not_exist.json");
  EXPECT_NE(expect_error([&] { load_tokenizer_json(missing); }).find(missing), std::string::npos);
  std::string bad = tmp("bad.json");
  std::ofstream(bad) << "{\"model\": ";
  std::string e1 = expect_error([&] { load_tokenizer(bad); });
  EXPECT_NE(e1.find(bad), std::string::npos) << e1;
  EXPECT_NE(e1.find("invalid JSON"), std::string::npos) << e1;
  std::string e2 = expect_error([&] { from_tokenizer_json(R"({"model":{"type":"Unigram"}})", "x.json"); });
  EXPECT_NE(e2.find("model.type"), std::string::npos) << e2;
  EXPECT_NE(e2.find("Unigram"), std::string::npos) << e2;
  std::string e3 = expect_error([&] { from_tokenizer_json(R"({"model":{"type":"WordPiece","unk_token":"[UNK]"}})", "y.json"); });
  EXPECT_NE(e3.find("model.vocab"), std::string::npos) << e3;
  EXPECT_NE(e3.find("y.json"), std::string::npos) << e3;
  std::string e4 = expect_error([&] { from_tokenizer_json(R"({"model":{"type":"WordLevel","unk_token":"u","vocab":{"u":0,"v":"x"}}})", "z.json"); });
  EXPECT_NE(e4.find("model.vocab.v"), std::string::npos) << e4;
  EXPECT_NE(expect_error([&] { from_tokenizer_json("[]", "w.json"); }).find("w.json"), std::string::npos);
  // BertProcessing / RobertaProcessing without [token, id] pairs (indexed unchecked: a segfault), and
  // a max_input_chars_per_word beyond int (wrapped to 1: every word [UNK]).
  const std::string wp = R"({"model":{"type":"WordPiece","unk_token":"[UNK]","vocab":{"[UNK]":0,"the":1})";
  for (const auto& [json_text, field] : std::vector<std::pair<std::string, std::string>>{
           {wp + R"(},"post_processor":{"type":"BertProcessing","cls":[],"sep":[]}})", "post_processor.cls"},
           {wp + R"(},"post_processor":{"type":"RobertaProcessing"}})", "post_processor"},
           {wp + R"(},"post_processor":{"type":"BertProcessing","cls":["[CLS]",1],"sep":7}})", "post_processor.sep"},
           {wp + R"(,"max_input_chars_per_word":4294967297}})", "model.max_input_chars_per_word"},
           {wp + R"(,"max_input_chars_per_word":0}})", "model.max_input_chars_per_word"}}) {
    const std::string e = expect_error([&] { from_tokenizer_json(json_text, "p.json"); });
    EXPECT_NE(e.find("p.json"), std::string::npos) << e;
    EXPECT_NE(e.find("'" + field), std::string::npos) << e;
  }
  // A pre-tokenizer or decoder the model's tokenizer does not implement (a typo; Whitespace, which
  // splits off punctuation) is refused by field: it loaded as another kind and tokenized differently.
  const std::string bpe = R"({"model":{"type":"BPE","end_of_word_suffix":"</w>","vocab":{"a</w>":0},"merges":[]})";
  const std::string wl = R"({"model":{"type":"WordLevel","unk_token":"u","vocab":{"u":0,"a":1}})";
  for (const auto& [json_text, want] : std::vector<std::pair<std::string, std::string>>{
           {bpe + R"(,"pre_tokenizer":{"type":"Whitespace"}})",
            "field 'pre_tokenizer.type': 'Whitespace' is not one that qkv's word-level BPE reads: expected "
            "WhitespaceSplit"},
           {bpe + R"(,"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"BytLevel"}]}})",
            "field 'pre_tokenizer.pretokenizers[0].type': 'BytLevel'"},
           {bpe + R"(,"decoder":{"type":"ByteLevel"},"pre_tokenizer":{"type":"Metaspace"}})",
            "'Metaspace' is not one that qkv's byte-level BPE reads: expected ByteLevel"},
           {wl + R"(,"pre_tokenizer":{"type":"Sploit"}})", "field 'pre_tokenizer.type': 'Sploit'"},
           {wl + R"(,"pre_tokenizer":{"type":"Split","pattern":{"Regex":" "}}})", "field 'pre_tokenizer.pattern'"},
           {R"({"model":{"type":"WordPiece","unk_token":"[UNK]","vocab":{"[UNK]":0}},"decoder":{"type":"BPEDecoder"}})",
            "field 'decoder.type': 'BPEDecoder' is not one that qkv's WordPiece reads"},
           // fields of the wrong JSON type, named (both said only "type must be string, but is number")
           {wl + R"(,"qkv_special_roles":{"unk":5}})", "field 'qkv_special_roles.unk': expected the token's text"},
           {wl + R"(,"added_tokens":[{"content":"u","id":"0"}]})", "field 'added_tokens[0].id': expected an integer"}}) {
    const std::string e = expect_error([&] { from_tokenizer_json(json_text, "q.json"); });
    EXPECT_NE(e.find("q.json"), std::string::npos) << e;
    EXPECT_NE(e.find(want), std::string::npos) << e;
  }
  std::string empty_dir = tmp("empty_dir");
  ::mkdir(empty_dir.c_str(), 0755);
  EXPECT_NE(expect_error([&] { load_tokenizer(empty_dir); }).find("no tokenizer.json"), std::string::npos);
}

// A word-level BPE with no unk_token loads (Hugging Face accepts it), and a character outside its
// vocabulary can only be found when encoding: the error then names the file the tokenizer came
// from (found by the tokenizer_json fuzzer, whose crash input is in tests/fuzz/crashes/).
TEST(TokenizerJson, EncodeErrorsNameTheTokenizersFile) {
  std::string path = tmp("bpe_without_unk.json");
  std::ofstream(path) << R"({"model": {"type": "BPE", "end_of_word_suffix": "</w>",
    "vocab": {"h": 0, "i</w>": 1, "hi</w>": 2}, "merges": ["h i</w>"]},
    "pre_tokenizer": {"type": "WhitespaceSplit"}})";
  auto tok = load_tokenizer(path);
  EXPECT_EQ(tok->source(), path);
  EXPECT_EQ(tok->encode("hi hi"), (std::vector<int32_t>{2, 2}));
  std::string e = expect_error([&] { tok->encode("hi ho"); });
  EXPECT_NE(e.find(path), std::string::npos) << e;
  EXPECT_NE(e.find("'o</w>' is not in the vocabulary"), std::string::npos) << e;
}

// A special token the tokenizer lacks is named with the file the tokenizer came from.
TEST(TokenizerJson, AMissingSpecialTokenNamesTheFile) {
  const std::string path = tmp("no_cls.json");
  std::ofstream(path) << R"({"model":{"type":"WordPiece","unk_token":"[UNK]","vocab":{"[UNK]":0,"the":1}}})";
  const auto tok = load_tokenizer_json(path);
  const std::string e = expect_error([&] { tok->require_special_id(Role::Cls); });
  EXPECT_EQ(e.rfind(path + ": this wordpiece tokenizer has no 'cls' token", 0), 0u) << e;
}
