#include "qkv/train/seq2seq_data.h"

#include <algorithm>

namespace qkv::train {

std::vector<int64_t> encode_sentence(const text::Tokenizer& tok, std::string_view line, int64_t eos, int64_t max_len,
                                     bool* truncated) {
  std::vector<int32_t> ids = tok.encode(line);
  std::vector<int64_t> out(ids.begin(), ids.end());
  bool cut = max_len > 0 && int64_t(out.size()) + 1 > max_len;
  if (cut) out.resize(size_t(std::max<int64_t>(max_len - 1, 0)));
  out.push_back(eos);
  if (truncated) *truncated = cut;
  return out;
}

Seq2SeqBatch make_batch(const std::vector<const Example*>& rows, const SeqIds& ids) {
  QKV_CHECK(!rows.empty(), "make_batch", "no examples");
  int64_t B = int64_t(rows.size()), S = 0, T = 0;
  for (const Example* e : rows) {
    S = std::max<int64_t>(S, int64_t(e->src.size()));
    T = std::max<int64_t>(T, int64_t(e->tgt.size()));
  }
  Seq2SeqBatch b;
  b.src = Tensor::full({B, S}, double(ids.pad), DType::i64);
  b.src_pad = Tensor::ones({B, S}, DType::u8);
  b.tgt_in = Tensor::full({B, T}, double(ids.pad), DType::i64);
  b.tgt_out = Tensor::full({B, T}, double(ids.pad), DType::i64);
  int64_t *src = b.src.data<int64_t>(), *tin = b.tgt_in.data<int64_t>(), *tout = b.tgt_out.data<int64_t>();
  uint8_t* pad = b.src_pad.data<uint8_t>();
  for (int64_t r = 0; r < B; ++r) {
    const Example& e = *rows[size_t(r)];
    for (size_t i = 0; i < e.src.size(); ++i) {
      src[r * S + int64_t(i)] = e.src[i];
      pad[r * S + int64_t(i)] = 0;
    }
    for (size_t i = 0; i < e.tgt.size(); ++i) {
      tin[r * T + int64_t(i)] = i == 0 ? ids.bos : e.tgt[i - 1];  // shifted right
      tout[r * T + int64_t(i)] = e.tgt[i];
    }
    b.src_tokens += int64_t(e.src.size());
    b.tgt_tokens += int64_t(e.tgt.size());
  }
  return b;
}

void make_source_batch(const std::vector<const std::vector<int64_t>*>& rows, int64_t pad_id, Tensor& src,
                       Tensor& src_pad) {
  QKV_CHECK(!rows.empty(), "make_source_batch", "no sentences");
  int64_t B = int64_t(rows.size()), S = 0;
  for (auto* r : rows) S = std::max<int64_t>(S, int64_t(r->size()));
  src = Tensor::full({B, S}, double(pad_id), DType::i64);
  src_pad = Tensor::ones({B, S}, DType::u8);
  for (int64_t b = 0; b < B; ++b)
    for (size_t i = 0; i < rows[size_t(b)]->size(); ++i) {
      src.data<int64_t>()[b * S + int64_t(i)] = (*rows[size_t(b)])[i];
      src_pad.data<uint8_t>()[b * S + int64_t(i)] = 0;
    }
}

}  // namespace qkv::train
