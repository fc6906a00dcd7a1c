// The attention viewer (qkv viz, tasks/attention_view.h, viz/attention_page.h):
//   - the weights embedded in the page, parsed back out of the HTML, equal the naive attention
//     path's weights for every set, layer and head, exactly (fp32, bit for bit: the replay is
//     attention_weights over the queries and keys the fused kernel saw; the reference is the naive
//     sdpa path run on those same q, k, v in the same forward pass); against a forward pass that
//     runs the naive path throughout, and against Seq2Seq::cross_attention (the PNG heatmaps'
//     path), they agree within 1e-6 (fp32): there the naive outputs feed the later layers;
//   - a subset of layers and heads is that slice of the full weights;
//   - GPT (causal: no weight above the diagonal) and BERT (a pair, with segment labels) likewise;
//   - a missing or broken model directory, empty text and text longer than the model's maximum
//     give errors naming what and where; `qkv viz` and `qkv translate --attention FILE.html`
//     write the page, FILE.png still a PNG;
//   - the page in headless Chromium (attention_view_browser.py): layer picked, heads toggled, a
//     token hovered, model and matrix views, through the page's controls; no console error; a
//     screenshot of each view in the test's output directory.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "qkv/io/bert.h"
#include "qkv/io/gpt2.h"
#include "qkv/io/model_dir.h"
#include "qkv/kernels/bf16.h"
#include "qkv/tasks/attention_view.h"
#include "qkv/text/char_word.h"
#include "qkv/util/file.h"
#include "dependency_skip.h"
#include "run_qkv.h"
#include "scratch_util.h"
#include "tiny_models.h"

namespace fs = std::filesystem;
using namespace qkv;

namespace {

using qkv_test::tiny_bert;
using qkv_test::tiny_gpt;
using qkv_test::tiny_translation_model;
using qkv_test::word_tokenizer;

std::string scratch(const std::string& name) { return qkv_test::scratch_dir("attention_view_" + name); }

std::vector<float> floats(const nlohmann::json& a) {
  std::vector<float> v;
  for (const auto& x : a) v.push_back(float(x.get<double>()));
  return v;
}

// The sets of a page written to disk and parsed back.
nlohmann::json round_trip(const viz::AttentionPage& page, const std::string& path) {
  viz::write_attention_page(path, page);
  return viz::read_attention_page_json(read_file(path), path);
}

void expect_equal_sets(const nlohmann::json& got, const viz::AttentionPage& ref) {
  ASSERT_EQ(got["sets"].size(), ref.sets.size());
  for (size_t s = 0; s < ref.sets.size(); ++s) {
    const auto& g = got["sets"][s];
    const viz::AttentionSet& r = ref.sets[s];
    SCOPED_TRACE(r.name);
    EXPECT_EQ(g["name"], r.name);
    EXPECT_EQ(g["layers"].get<std::vector<int64_t>>(), r.layers);
    EXPECT_EQ(g["heads"].get<std::vector<int64_t>>(), r.heads);
    std::vector<float> w = floats(g["weights"]);
    ASSERT_EQ(w.size(), r.weights.size());
    size_t differ = 0;
    for (size_t i = 0; i < w.size(); ++i) differ += w[i] != r.weights[i];  // exact, bit for bit
    EXPECT_EQ(differ, 0u) << "of " << w.size() << " weights";
  }
}

}  // namespace

TEST(AttentionView, TranslationPageEqualsTheNaivePathForEveryLayerAndHead) {
  tasks::Translator t(tiny_translation_model(11));
  tasks::ViewInput in;
  in.text = "cannot open the file";
  in.target = "file the open cannot";
  tasks::ViewOptions naive;
  naive.naive = attention::AttentionRecord::Naive::beside;
  viz::AttentionPage ref = tasks::translation_attention_page(t, in, naive);
  viz::AttentionPage page = tasks::translation_attention_page(t, in);
  ASSERT_EQ(page.sets.size(), 3u);
  const std::string dir = scratch("translation");
  nlohmann::json j = round_trip(page, dir + "/page.html");
  expect_equal_sets(j, ref);
  // The sets and their shapes: source 4 words + </s>; target 4 words + </s>, decoder input <s> + 4.
  EXPECT_EQ(j["sets"][0]["tq"], 5);
  EXPECT_EQ(j["sets"][1]["causal"], true);
  EXPECT_EQ(j["sets"][2]["queries"], "target");
  EXPECT_EQ(j["sets"][2]["keys"], "source");
  EXPECT_EQ(j["sequences"]["target"].back(), "</s>");
  EXPECT_EQ(j["sequences"]["decoder input"].front(), "<s>");
  // Rows sum to 1; the causal set has no weight above the diagonal.
  const auto& dec = page.sets[1];
  for (size_t lh = 0; lh < dec.layers.size() * dec.heads.size(); ++lh)
    for (int64_t i = 0; i < dec.tq; ++i) {
      double sum = 0;
      for (int64_t k = 0; k < dec.tk; ++k) {
        float v = dec.weights[(lh * dec.tq + i) * dec.tk + k];
        sum += v;
        if (k > i) {
          EXPECT_EQ(v, 0.0f);
        }
      }
      EXPECT_NEAR(sum, 1.0, 1e-5);
    }
  // The cross set equals the model's own cross_attention (the PNG heatmaps' path).
  const auto& src_ids = [&] {
    std::vector<int64_t> ids;
    for (int32_t id : t.bundle().src_tok->encode(in.text)) ids.push_back(id);
    ids.push_back(3);
    return ids;
  }();
  std::vector<int64_t> tgt_in{2};
  for (int32_t id : t.bundle().tgt_tok->encode(*in.target)) tgt_in.push_back(id);
  auto maps = t.bundle().model->cross_attention(Tensor::from_vector(src_ids, Shape{1, int64_t(src_ids.size())}),
                                                Tensor::zeros({1, int64_t(src_ids.size())}, DType::u8),
                                                Tensor::from_vector(tgt_in, Shape{1, int64_t(tgt_in.size())}));
  ASSERT_EQ(maps.layers.size(), 2u);
  std::vector<float> cross;
  for (auto& m : maps.layers) {
    Tensor c = m.contiguous();
    cross.insert(cross.end(), c.data<float>(), c.data<float>() + c.numel());
  }
  // That path materialises the cross weights (naive) and continues with the naive output, so the
  // second layer's inputs differ from the kernel's by rounding: equal within 1e-6 (fp32).
  std::vector<float> got = floats(j["sets"][2]["weights"]);
  ASSERT_EQ(got.size(), cross.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], cross[i], 1e-6) << i;
  // So does a whole forward pass through the naive path (every attention materialised).
  naive.naive = attention::AttentionRecord::Naive::instead;
  viz::AttentionPage all_naive = tasks::translation_attention_page(t, in, naive);
  float worst = 0;
  for (size_t s = 0; s < 3; ++s)
    for (size_t i = 0; i < page.sets[s].weights.size(); ++i)
      worst = std::max(worst, std::abs(page.sets[s].weights[i] - all_naive.sets[s].weights[i]));
  EXPECT_LE(worst, 1e-6f);
  std::printf("largest |replay - naive forward pass| weight difference: %.3g\n", double(worst));
  // Positional panel: the sinusoidal table of positions 0..4 and its dot products.
  ASSERT_TRUE(j["positional"].is_object());
  EXPECT_EQ(j["positional"]["positions"], 5);
  EXPECT_EQ(j["positional"]["dim"], 32);
  std::vector<float> table = floats(j["positional"]["table"]);
  EXPECT_NEAR(table[1 * 32 + 0], std::sin(1.0), 1e-6);  // PE(1, 0) = sin(1)
  EXPECT_NEAR(table[1 * 32 + 1], std::cos(1.0), 1e-6);  // PE(1, 1) = cos(1)
  EXPECT_NEAR(floats(j["positional"]["dots"])[0], 16.0, 1e-4);  // |PE(0)|^2 = d/2 (sin 0 = 0, cos 0 = 1)
}

TEST(AttentionView, RotaryAndRelativePositionsEqualTheNaivePath) {
  for (const char* positional : {"rope", "relative", "learned"}) {
    SCOPED_TRACE(positional);
    tasks::Translator t(tiny_translation_model(21, 16, positional));
    tasks::ViewInput in;
    in.text = "cannot open the file";
    in.target = "file the open cannot";
    tasks::ViewOptions naive;
    naive.naive = attention::AttentionRecord::Naive::beside;
    viz::AttentionPage ref = tasks::translation_attention_page(t, in, naive);
    viz::AttentionPage page = tasks::translation_attention_page(t, in);
    nlohmann::json j = round_trip(page, scratch(std::string("pos_") + positional) + "/page.html");
    expect_equal_sets(j, ref);
    EXPECT_TRUE(j["positional"].is_null());  // the panel is for sinusoidal positions only
  }
}

TEST(AttentionView, LayerAndHeadSubsetIsThatSliceOfTheFullWeights) {
  tasks::Translator t(tiny_translation_model(12));
  tasks::ViewInput in;
  in.text = "read the user name";
  viz::AttentionPage full = tasks::translation_attention_page(t, in);
  tasks::ViewOptions opt;
  opt.layers = {1};
  opt.heads = {2, 0};
  viz::AttentionPage sub = tasks::translation_attention_page(t, in, opt);
  for (size_t s = 0; s < 3; ++s) {
    const auto& f = full.sets[s];
    const auto& g = sub.sets[s];
    ASSERT_EQ(g.weights.size(), size_t(2 * f.tq * f.tk));
    for (size_t hi = 0; hi < 2; ++hi)
      for (int64_t x = 0; x < f.tq * f.tk; ++x)
        ASSERT_EQ(g.weights[hi * f.tq * f.tk + x], f.weights[((1 * 4) + opt.heads[hi]) * f.tq * f.tk + x]);
  }
  opt.heads = {4};
  try {
    tasks::translation_attention_page(t, in, opt);
    FAIL() << "head 4 of 4 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--heads 4 is out of range: the model has 4 heads"), std::string::npos) << e.what();
  }
  opt.heads = {1, 1};
  try {
    tasks::translation_attention_page(t, in, opt);
    FAIL() << "head 1 twice accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--heads 1 is given twice"), std::string::npos) << e.what();
  }
  opt = {};
  opt.max_bytes = 1000;  // under a MiB: the message says bytes (it said "0 MiB, over the limit of 0 MiB")
  try {
    tasks::translation_attention_page(t, in, opt);
    FAIL() << "a page over 1000 bytes accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("over the limit of 1000 bytes (--max-mb)"), std::string::npos) << e.what();
  }
}

TEST(AttentionView, GptCausalSelfAttentionEqualsTheNaivePath) {
  io::GptBundle b = tiny_gpt();
  tasks::ViewInput in;
  in.text = "the user cannot save the file";
  tasks::ViewOptions naive;
  naive.naive = attention::AttentionRecord::Naive::beside;
  viz::AttentionPage ref = tasks::gpt_attention_page(b, in, naive);
  nlohmann::json j = round_trip(tasks::gpt_attention_page(b, in), scratch("gpt") + "/page.html");
  expect_equal_sets(j, ref);
  EXPECT_EQ(j["model_type"], "gpt");
  EXPECT_EQ(j["sets"][0]["causal"], true);
  EXPECT_EQ(j["sets"][0]["tq"], 6);
  const auto& s = ref.sets[0];
  for (size_t lh = 0; lh < 8; ++lh)
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t k = i + 1; k < 6; ++k) EXPECT_EQ(s.weights[(lh * 6 + i) * 6 + k], 0.0f);
  in.text = "the the the the the the the the the the the the the";  // 13 > n_positions 12
  try {
    tasks::gpt_attention_page(b, in);
    FAIL() << "a prompt longer than n_positions accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("more than the model's n_positions 12"), std::string::npos) << e.what();
  }
}

TEST(AttentionView, BertPairEqualsTheNaivePathWithSegmentLabels) {
  io::BertBundle b = tiny_bert();
  tasks::ViewInput in;
  in.text = "open the file";
  in.pair = "file not found";
  tasks::ViewOptions naive;
  naive.naive = attention::AttentionRecord::Naive::beside;
  viz::AttentionPage ref = tasks::bert_attention_page(b, in, naive);
  nlohmann::json j = round_trip(tasks::bert_attention_page(b, in), scratch("bert") + "/page.html");
  expect_equal_sets(j, ref);
  EXPECT_EQ(j["model_type"], "bert");
  EXPECT_EQ(j["sequences"]["text"].front(), "[CLS]");
  EXPECT_EQ(j["segments"]["text"].get<std::vector<int>>(), (std::vector<int>{0, 0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(j["sets"][0]["causal"], false);
}

TEST(AttentionView, ErrorsNameWhatAndWhere) {
  const std::string dir = scratch("errors");
  auto message = [&](const std::string& model, const std::string& text) {
    tasks::ViewInput in;
    in.text = text;
    try {
      tasks::write_attention_view(model, in, dir + "/x.html");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(message(dir + "/none", "x").find(dir + "/none: no such directory"), std::string::npos);
  fs::create_directories(dir + "/empty");
  EXPECT_NE(message(dir + "/empty", "x").find(dir + "/empty/config.json: missing"), std::string::npos);
  fs::create_directories(dir + "/broken");
  write_file_atomic(dir + "/broken/config.json", "{\"model_type\": ");
  EXPECT_NE(message(dir + "/broken", "x").find(dir + "/broken/config.json: not valid JSON"), std::string::npos);
  write_file_atomic(dir + "/broken/config.json", "{\"model_type\": \"lstm\"}");
  EXPECT_NE(message(dir + "/broken", "x").find("model_type: expected transformer, rnn, gpt2 or bert, got \"lstm\""),
            std::string::npos);
  // A translation model without its weights: the loader names the file.
  io::save_seq2seq(dir + "/model", tiny_translation_model(13));
  fs::remove(dir + "/model/model.safetensors");
  EXPECT_NE(message(dir + "/model", "x").find("model.safetensors"), std::string::npos) << message(dir + "/model", "x");
  io::save_seq2seq(dir + "/model", tiny_translation_model(13));
  EXPECT_NE(message(dir + "/model", "  ").find("viz: the source text is empty"), std::string::npos);
  std::string longer;
  for (int i = 0; i < 16; ++i) longer += "file ";
  EXPECT_NE(message(dir + "/model", longer).find("the source text has 16 tokens (plus </s>), more than the model's max_len 16"),
            std::string::npos)
      << message(dir + "/model", longer);
  EXPECT_FALSE(fs::exists(dir + "/x.html"));
}

TEST(AttentionView, CliWritesThePageAndTranslateKeepsPng) {
  const std::string dir = scratch("cli");
  io::save_seq2seq(dir + "/model", tiny_translation_model(14));
  ASSERT_EQ(qkv::testing::run_qkv({"viz", "--model", dir + "/model", "open the file", "--target", "the file open", "-o",
                              dir + "/viz.html"}, dir + "/viz.log"), 0)
      << read_file(dir + "/viz.log");
  nlohmann::json j = viz::read_attention_page_json(read_file(dir + "/viz.html"), "viz.html");
  EXPECT_EQ(j["info"][1][1], "the file open");
  write_file_atomic(dir + "/in.txt", "cannot open the file\nread the user name\n");
  ASSERT_EQ(qkv::testing::run_qkv({"translate", "--model", dir + "/model", "-i", dir + "/in.txt", "-o", dir + "/out.txt",
                              "--attention", dir + "/t.html", "--attention-line", "2"}, dir + "/t.log"), 0)
      << read_file(dir + "/t.log");
  nlohmann::json t = viz::read_attention_page_json(read_file(dir + "/t.html"), "t.html");
  EXPECT_EQ(t["info"][0][1], "read the user name");
  std::string second = read_file(dir + "/out.txt");
  second = second.substr(second.find('\n') + 1);
  second.pop_back();
  EXPECT_EQ(t["info"][1][1], second);  // the translation printed is the one shown
  ASSERT_EQ(qkv::testing::run_qkv({"translate", "--model", dir + "/model", "-i", dir + "/in.txt", "-o", dir + "/out.txt",
                              "--attention", dir + "/t.png"}, dir + "/p.log"), 0)
      << read_file(dir + "/p.log");
  EXPECT_EQ(read_file(dir + "/t.png").substr(1, 3), "PNG");
  if (kernels::dnnl_cpu_info().bf16_native()) {  // weights held in bf16: the maps are drawn in bf16 too
    for (const char* file : {"/b.html", "/b.png"}) {
      ASSERT_EQ(qkv::testing::run_qkv({"translate", "--model", dir + "/model", "-i", dir + "/in.txt", "-o",
                                       dir + "/b.txt", "--precision", "bf16", "--attention", dir + file},
                                      dir + "/b.log"), 0)
          << file << ": " << read_file(dir + "/b.log");
    }
    std::string first = read_file(dir + "/b.txt");
    first = first.substr(0, first.find('\n'));
    EXPECT_EQ(viz::read_attention_page_json(read_file(dir + "/b.html"), "b.html")["info"][1][1], first);
    EXPECT_EQ(read_file(dir + "/b.png").substr(1, 3), "PNG");
  }
  EXPECT_NE(qkv::testing::run_qkv({"viz", "--model", dir + "/model", ""}, dir + "/e.log"), 0);
  EXPECT_NE(read_file(dir + "/e.log").find("the source text is empty"), std::string::npos);
  // viz writes HTML only: a .png name is refused rather than filled with a page; invalid UTF-8 too.
  EXPECT_EQ(qkv::testing::run_qkv({"viz", "--model", dir + "/model", "open", "-o", dir + "/v.png"}, dir + "/e.log"), 1);
  EXPECT_NE(read_file(dir + "/e.log").find("viz writes an HTML page; give a .html file name"), std::string::npos)
      << read_file(dir + "/e.log");
  EXPECT_FALSE(fs::exists(dir + "/v.png"));
  EXPECT_EQ(qkv::testing::run_qkv({"viz", "--model", dir + "/model", "open \xff", "-o", dir + "/v.html"},
                                  dir + "/e.log"), 1);
  EXPECT_NE(read_file(dir + "/e.log").find("viz: text: not valid UTF-8"), std::string::npos)
      << read_file(dir + "/e.log");
}

TEST(AttentionView, CliDetectsGptAndBertDirectories) {
  const std::string dir = scratch("cli_types");
  io::save_gpt2(dir + "/gpt", tiny_gpt());
  io::save_bert(dir + "/bert", tiny_bert());
  ASSERT_EQ(qkv::testing::run_qkv({"viz", "--model", dir + "/gpt", "the user cannot save", "-o", dir + "/gpt.html"},
                                  dir + "/gpt.log"), 0)
      << read_file(dir + "/gpt.log");
  nlohmann::json g = viz::read_attention_page_json(read_file(dir + "/gpt.html"), "gpt.html");
  EXPECT_EQ(g["model_type"], "gpt");
  EXPECT_EQ(g["sets"][0]["tq"], 4);
  ASSERT_EQ(qkv::testing::run_qkv({"viz", "--model", dir + "/bert", "open the file", "--pair", "not found", "-o",
                                   dir + "/bert.html"}, dir + "/bert.log"), 0)
      << read_file(dir + "/bert.log");
  nlohmann::json b = viz::read_attention_page_json(read_file(dir + "/bert.html"), "bert.html");
  EXPECT_EQ(b["model_type"], "bert");
  EXPECT_EQ(b["segments"]["text"].size(), 8u);  // [CLS] 3 [SEP] 2 [SEP]
  // The other family's input is refused by name.
  EXPECT_NE(qkv::testing::run_qkv({"viz", "--model", dir + "/gpt", "x", "--pair", "y"}, dir + "/e.log"), 0);
  EXPECT_NE(read_file(dir + "/e.log").find("a GPT model takes one prompt"), std::string::npos) << read_file(dir + "/e.log");
}

TEST(AttentionView, RnnModelShowsItsOneAttention) {
  io::Seq2SeqBundle b;
  b.src_tok = b.tgt_tok = word_tokenizer({"<pad>", "<unk>", "<s>", "</s>"});
  const int64_t V = b.src_tok->vocab_size();
  b.config = {{"model_type", "rnn"},
              {"model", {{"src_vocab", V}, {"tgt_vocab", V}, {"cell", "gru"}, {"embed_dim", 16}, {"enc_hidden", 16},
                         {"dec_hidden", 16}, {"max_len", 16}, {"attention", "bahdanau"}, {"attn_dim", 16},
                         {"pad_id", 0}, {"bos_id", 2}, {"eos_id", 3}}}};
  default_generator().manual_seed(7);
  b.model = io::make_seq2seq(b.config, "test config");
  tasks::Translator t(b);
  tasks::ViewInput in;
  in.text = "cannot open the file";
  in.target = "file the open cannot";
  viz::AttentionPage page = tasks::translation_attention_page(t, in);
  ASSERT_EQ(page.sets.size(), 1u);
  EXPECT_EQ(page.model_type, "rnn");
  std::vector<int64_t> tgt_in{2};
  for (int32_t id : b.tgt_tok->encode(*in.target)) tgt_in.push_back(id);
  std::vector<int64_t> src;
  for (int32_t id : b.src_tok->encode(in.text)) src.push_back(id);
  src.push_back(3);
  auto maps = b.model->cross_attention(Tensor::from_vector(src, Shape{1, 5}), Tensor::zeros({1, 5}, DType::u8),
                                       Tensor::from_vector(tgt_in, Shape{1, 5}));
  Tensor w = maps.layers.at(0).contiguous();
  EXPECT_EQ(page.sets[0].weights, std::vector<float>(w.data<float>(), w.data<float>() + w.numel()));
  nlohmann::json j = round_trip(page, scratch("rnn") + "/page.html");
  EXPECT_EQ(floats(j["sets"][0]["weights"]), page.sets[0].weights);
}

TEST(AttentionView, PageWorksInHeadlessChromium) {
  const std::string dir = scratch("browser");
  tasks::Translator t(tiny_translation_model(15));
  tasks::ViewInput in;
  in.text = "cannot open the file";
  in.target = "file the open cannot";
  viz::write_attention_page(dir + "/page.html", tasks::translation_attention_page(t, in, {}, "browser test"));
  // A long input (52 words + </s>): the model view max-pools its thumbnails and says so.
  tasks::Translator long_model(tiny_translation_model(16, 64));
  for (int i = 0; i < 12; ++i) in.text += " read the user name";
  in.target = in.text;
  viz::write_attention_page(dir + "/long.html", tasks::translation_attention_page(long_model, in, {}, "long input"));
  for (const std::string name : {"page", "long"}) {
    const std::string out = dir + "/screenshots_" + name;
    const std::string cmd = qkv_test::python() + " " + std::string(QKV_SOURCE_DIR) +
                            "/tests/tasks/attention_view_browser.py " + dir + "/" + name + ".html " + out + " > " +
                            dir + "/browser.log 2>&1";
    int rc = qkv_test::run_shell(cmd);
    std::string log = read_file(dir + "/browser.log");
    if (rc == 77) QKV_SKIP_MISSING_DEPENDENCY() << log;
    ASSERT_EQ(rc, 0) << name << ".html: " << log;
    for (const char* shot : {"head_view.png", "model_view.png", "model_view_enlarged.png", "matrix_view.png", "positional.png"})
      EXPECT_TRUE(fs::exists(out + "/" + shot) && fs::file_size(out + "/" + shot) > 1000) << shot;
    std::printf("screenshots: %s\n", out.c_str());
  }
}

// Token labels holding "<!--<script>" and "</script>": the embedded data carries no '<' or '>' for
// the HTML parser (the first switched it into the "double-escaped" state, the element's own
// </script> closed nothing and the viewer showed a blank page), and reads back unchanged.
TEST(AttentionView, TextThatLooksLikeHtmlStaysInsideTheDataElement) {
  viz::AttentionPage page;
  page.title = "qkv attention: <b>";
  page.model_type = "gpt";
  page.sequences = {{"tokens", {"<!--<script>", "</script>", "a>b"}}};
  viz::AttentionSet set;
  set.name = "self-attention", set.queries = "tokens", set.keys = "tokens", set.causal = true;
  set.layers = {0}, set.heads = {0}, set.tq = 3, set.tk = 3;
  set.weights = {1, 0, 0, 0.5f, 0.5f, 0, 0.25f, 0.25f, 0.5f};
  page.sets = {set};
  const std::string html = viz::attention_page_html(page);
  const std::string open = "<script type=\"application/json\" id=\"qkv-data\">";
  const size_t b = html.find(open), e = html.find("</script>", b);
  ASSERT_NE(b, std::string::npos) << html.substr(0, 2000);
  ASSERT_NE(e, std::string::npos);
  const std::string data = html.substr(b + open.size(), e - b - open.size());
  EXPECT_EQ(data.find('<'), std::string::npos) << data;
  EXPECT_EQ(data.find('>'), std::string::npos) << data;
  const nlohmann::json j = viz::read_attention_page_json(html, "page");
  EXPECT_EQ(j["sequences"]["tokens"], nlohmann::json({"<!--<script>", "</script>", "a>b"}));
}
