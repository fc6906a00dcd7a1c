#include "qkv/train/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <optional>

#include <nlohmann/json.hpp>

#include "qkv/autograd/node.h"
#include "qkv/io/format/safetensors.h"
#include "qkv/io/format/safetensors_reader.h"
#include "qkv/kernels/bf16_step_weights.h"
#include "qkv/kernels/precision_speed.h"
#include "qkv/tensor/rng.h"
#include "qkv/train/checkpoint.h"
#include "qkv/train/batch_order.h"
#include "qkv/train/clip.h"
#include "qkv/train/progress.h"
#include "qkv/util/error_context.h"
#include "qkv/util/file.h"

namespace qkv::train {
namespace fs = std::filesystem;

TrainOptions TrainOptions::from_config(ConfigReader& r) {
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  TrainOptions o;
  constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
  // Counts and intervals: 0 is "no limit" or "only at the end"; a negative one was read as 0.
  o.max_steps = r.integer_in("max_steps", o.max_steps, 0, kI64Max);
  o.max_epochs = r.integer_in("max_epochs", o.max_epochs, 0, kI64Max);
  o.max_minutes = r.number("max_minutes", o.max_minutes);
  // The micro-batches of an update are all read before it (2^40 ran out of memory in libgomp).
  o.accum_steps = r.integer_in("accum_steps", o.accum_steps, 1, kMaxAccumSteps);
  o.label_smoothing = r.number("label_smoothing", o.label_smoothing);
  o.clip_norm = r.number("clip_norm", o.clip_norm);
  o.valid_every = r.integer_in("valid_every", o.valid_every, 0, kI64Max);
  o.save_every = r.integer_in("save_every", o.save_every, 0, kI64Max);
  o.log_every = r.integer_in("log_every", o.log_every, 1, kI64Max);
  o.keep_last = int(r.integer_in("keep_last", o.keep_last, 1, kIntMax));
  o.patience = int(r.integer_in("patience", o.patience, 0, kIntMax));
  o.average_last = int(r.integer_in("average_last", o.average_last, 0, kIntMax));
  const std::string precision = r.string("precision", kernels::precision_name(o.precision));
  QKV_CHECK(precision == "fp32" || precision == "bf16", r.where("precision"), "expected \"fp32\" or \"bf16\", got \"",
            precision, "\"");
  o.precision = kernels::parse_precision(precision);
  if (o.precision == kernels::MatmulPrecision::bf16) {
    const kernels::DnnlCpuInfo& cpu = kernels::dnnl_cpu_info();
    QKV_CHECK(cpu.bf16_native(), r.where("precision"), "\"bf16\" needs a CPU with AMX or AVX512_BF16; this one (",
              cpu.cpu_model, ", oneDNN ISA ", cpu.isa, ") has neither: use \"fp32\"");
  }
  o.on_nonfinite = parse_nonfinite_policy(r.string("on_nonfinite", nonfinite_policy_name(o.on_nonfinite)),
                                          r.where("on_nonfinite"));
  o.max_nonfinite_skips = int(r.integer_in("max_nonfinite_skips", o.max_nonfinite_skips, 0, kIntMax));
  QKV_CHECK(std::isfinite(o.clip_norm) && o.clip_norm >= 0, r.where("clip_norm"),
            "must be a finite number >= 0 (0: no clipping), got ", o.clip_norm);
  QKV_CHECK(o.label_smoothing >= 0 && o.label_smoothing < 1, r.where("label_smoothing"), "must be in [0, 1), got ",
            o.label_smoothing);
  QKV_CHECK(std::isfinite(o.max_minutes) && o.max_minutes >= 0, r.where("max_minutes"),
            "must be a finite number >= 0, got ", o.max_minutes);
  QKV_CHECK(o.max_steps > 0 || o.max_epochs > 0 || o.max_minutes > 0, r.where("max_steps"),
            "give max_steps, max_epochs or max_minutes > 0");
  QKV_CHECK(o.keep_last >= 1, r.where("keep_last"), "must be >= 1, got ", o.keep_last);
  QKV_CHECK(o.average_last >= 0 && o.average_last <= o.keep_last, r.where("average_last"),
            "must be between 0 and keep_last (", o.keep_last, "): only kept checkpoints can be averaged, got ",
            o.average_last);
  return o;
}

Trainer::Trainer(TrainingTask& task, Optimizer& opt, const LrSchedule& schedule, TrainOptions options,
                 std::string run_dir, TrainCallbacks callbacks)
    : task_(task), opt_(opt), schedule_(schedule), o_(options), run_dir_(std::move(run_dir)),
      checkpoints_(run_dir_, o_.keep_last), cb_(std::move(callbacks)) {}

namespace {
Tensor i64_scalar(int64_t v) { return Tensor::from_vector(std::vector<int64_t>{v}, Shape{}); }
int64_t read_i64(const std::map<std::string, Tensor>& st, const std::string& key, const std::string& file) {
  auto it = st.find(key);
  QKV_CHECK(it != st.end(), file, "training state has no '", key, "'");
  QKV_CHECK(it->second.dtype() == DType::i64 && it->second.numel() == 1, file, "'", key, "' must be one i64, got ",
            it->second.str());
  return *it->second.data<int64_t>();
}
}  // namespace

double Trainer::train_step() {
  const auto t0 = std::chrono::steady_clock::now();
  task_.model().train();
  std::vector<TrainingTask::MicroBatch> micro;
  int64_t tokens = 0;
  for (int64_t i = 0; i < o_.accum_steps; ++i) {
    micro.push_back(task_.next());
    tokens += micro.back().units;
  }
  QKV_CHECK(tokens > 0, "train", "a training step has no target tokens (empty batches?)");
  last_step_tokens_ = tokens;
  opt_.zero_grad();
  double loss_sum = 0;
  {
    const kernels::MatmulPrecisionScope precision(o_.precision);  // the forward and backward products
    std::optional<kernels::Bf16StepWeights> copies;  // bf16: each weight converted once for the step
    if (o_.precision == kernels::MatmulPrecision::bf16) copies.emplace(opt_.params());
    for (const TrainingTask::MicroBatch& b : micro) {
      Tensor loss = comm_.distributed() ? shard_loss(b) : b.summed_loss(o_.label_smoothing);
      if (!loss.defined()) continue;  // data-parallel: this rank has no rows of b
      loss_sum += loss.item();
      // d(total / tokens): each micro-batch contributes its share of the step's mean.
      backward(loss, Tensor::full(loss.shape(), 1.0 / double(tokens)));
    }
  }
  if (comm_.distributed()) loss_sum = sum_over_ranks(loss_sum);  // every rank: the same sums
  last_loss_ = loss_sum / double(tokens);
  const double norm = grad_norm(opt_.params());  // clipping's norm, and the NaN/Inf detector
  if (!step_is_finite(last_loss_, norm)) return last_loss_;
  ++step_;
  if (o_.clip_norm > 0) scale_grads_to_norm(opt_.params(), o_.clip_norm, norm);
  opt_.set_lr(schedule_.lr_at(step_));
  opt_.step();
  step_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return last_loss_;
}

bool Trainer::step_is_finite(double loss, double norm) {
  last_step_skipped_ = !std::isfinite(loss) || !std::isfinite(norm);
  if (!last_step_skipped_) {
    skipped_in_a_row_ = 0;
    return true;
  }
  const std::string what = describe_nonfinite_step(step_ + 1, loss, norm, task_.model().named_parameters());
  QKV_CHECK(o_.on_nonfinite == NonFinitePolicy::skip, "train", what,
            "; stopped before the update (train.on_nonfinite \"stop\"; \"skip\" would drop the step)");
  QKV_CHECK(++skipped_in_a_row_ <= o_.max_nonfinite_skips, "train", what, "; ", skipped_in_a_row_,
            " steps in a row were non-finite, more than train.max_nonfinite_skips (", o_.max_nonfinite_skips,
            "): stopped");
  opt_.zero_grad();
  std::fprintf(stderr, "train: skipped %s\n", what.c_str());
  return false;
}

int64_t Trainer::all_reduce_bytes() const {
  if (allreduce_) return allreduce_->bytes_per_step();
  int64_t floats = 0;
  for (const Tensor& p : opt_.params()) floats += p.numel() + 1;
  return 4 * floats;
}

Tensor Trainer::shard_loss(const TrainingTask::MicroBatch& b) {
  QKV_CHECK(b.rows_loss && int64_t(b.row_units.size()) > 0, "distributed training",
            "this task's batches cannot be split by rows, so it trains on one process only (run it without mpirun)");
  const auto [begin, end] = shard_rows(b.row_units, comm_.rank(), comm_.size());
  if (begin == end) return Tensor();
  return b.rows_loss(o_.label_smoothing, begin, end);
}

double Trainer::sum_over_ranks(double loss_sum) {
  if (!allreduce_) allreduce_ = std::make_unique<GradientAllReduce>(comm_, opt_.params());
  allreduce_->run(step_ + 1);
  // The losses, a stop signal on any rank, and the wall-clock budget as any rank sees it.
  const bool late = max_seconds_ > 0 &&
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start_).count() >= max_seconds_;
  const std::vector<double> all = comm_.all_gather(std::vector<double>{loss_sum, stop_requested() ? 1.0 : 0.0,
                                                                       late ? 1.0 : 0.0},
                                                   "the loss sum of step " + std::to_string(step_ + 1));
  double total = 0;
  agreed_stop_ = agreed_out_of_time_ = false;
  for (int r = 0; r < comm_.size(); ++r) {  // in rank order: the same sum everywhere
    total += all[size_t(3 * r)];
    agreed_stop_ = agreed_stop_ || all[size_t(3 * r + 1)] != 0;
    agreed_out_of_time_ = agreed_out_of_time_ || all[size_t(3 * r + 2)] != 0;
  }
  return total;
}

std::map<std::string, Tensor> Trainer::training_state() const {
  std::map<std::string, Tensor> st;
  for (auto& [k, v] : opt_.state_dict_view()) st["optim." + k] = v;  // written at once: no copies
  st["step"] = i64_scalar(step_);
  st["best_step"] = i64_scalar(best_step_);
  st["bad_validations"] = i64_scalar(bad_validations_);
  st["validated_step"] = i64_scalar(validated_step_);
  st["best_bleu"] = Tensor::from_vector(std::vector<double>{best_bleu_}, Shape{});
  const Generator& g = default_generator();
  st["rng.seed"] = i64_scalar(int64_t(g.seed()));
  st["rng.offset"] = i64_scalar(int64_t(g.offset()));
  for (auto& [k, v] : task_.position()) st["data." + k] = i64_scalar(v);
  // How bf16 products ran (kernels/bf16.h): chosen by a timing when the run started, so a resume
  // must not choose again (another summation order would break bit-exact resumption).
  if (o_.precision == kernels::MatmulPrecision::bf16)
    st["bf16_products"] = i64_scalar(int64_t(kernels::bf16_products()));
  if (comm_.distributed()) {  // the world size, and every rank's generator (its own dropout stream)
    st["dist.ranks"] = i64_scalar(comm_.size());
    const std::vector<int64_t> rng = comm_.all_gather(std::vector<int64_t>{int64_t(g.seed()), int64_t(g.offset())},
                                                      "the generator states of step " + std::to_string(step_));
    for (int r = 0; r < comm_.size(); ++r) {
      st["dist.rng.seed." + std::to_string(r)] = i64_scalar(rng[size_t(2 * r)]);
      st["dist.rng.offset." + std::to_string(r)] = i64_scalar(rng[size_t(2 * r + 1)]);
    }
  }
  return st;
}

void Trainer::restore_training_state(const std::string& dir) {
  const std::string file = (fs::path(dir) / "training_state.safetensors").string();
  // The optimizer's and the data stream's checks name themselves; the error names the file too.
  with_context(file, [&] { restore_training_state_from(file); });
}

void Trainer::restore_training_state_from(const std::string& file) {
  // The optimizer's buffers are read straight into its new state; the rest are scalars.
  const safetensors::Reader reader(file);
  std::map<std::string, Tensor> st;
  for (const std::string& k : reader.names())
    if (k.rfind("optim.", 0) != 0) st[k] = reader.read(k);
  const int64_t ranks = st.count("dist.ranks") ? read_i64(st, "dist.ranks", file) : 1;
  QKV_CHECK(ranks == comm_.size(), file, "this run was trained on ", ranks, ranks == 1 ? " process" : " MPI ranks",
            " and is being resumed on ", comm_.size(), ": a data-parallel run resumes only with the same number of ranks (",
            ranks == 1 ? std::string("run qkv train without mpirun") : "mpirun -np " + std::to_string(ranks), ")");
  std::map<std::string, int64_t> pos;
  for (auto& [k, v] : st)
    if (k.rfind("data.", 0) == 0) pos[k.substr(5)] = read_i64(st, k, file);
  opt_.load_state_dict(reader, "optim.");
  step_ = read_i64(st, "step", file);
  best_step_ = read_i64(st, "best_step", file);
  bad_validations_ = read_i64(st, "bad_validations", file);
  validated_step_ = st.count("validated_step") ? read_i64(st, "validated_step", file) : -1;
  auto bb = st.find("best_bleu");
  QKV_CHECK(bb != st.end() && bb->second.dtype() == DType::f64, file, "training state needs f64 'best_bleu'");
  best_bleu_ = *bb->second.data<double>();
  default_generator().set_state(uint64_t(read_i64(st, "rng.seed", file)), uint64_t(read_i64(st, "rng.offset", file)));
  if (comm_.distributed()) {
    const std::string r = std::to_string(comm_.rank());
    default_generator().set_state(uint64_t(read_i64(st, "dist.rng.seed." + r, file)),
                                  uint64_t(read_i64(st, "dist.rng.offset." + r, file)));
  }
  task_.restore(pos);
  if (o_.precision == kernels::MatmulPrecision::bf16 && st.count("bf16_products")) {
    const int64_t how = read_i64(st, "bf16_products", file);
    QKV_CHECK(how == int64_t(kernels::Bf16Products::native) || how == int64_t(kernels::Bf16Products::fp32_fma), file,
              "'bf16_products' must be 0 (native) or 1 (fp32_fma), got ", how);
    kernels::set_bf16_products(kernels::Bf16Products(how));
  }
  restored_ = true;
}

std::string Trainer::save_checkpoint() {
  auto state = training_state();  // data-parallel: every rank takes part (the generator states)
  if (!comm_.is_main()) return "";
  return checkpoints_.save(step_, [&](const std::string& dir) {
    if (cb_.write_model) cb_.write_model(dir);
    else task_.model().save((fs::path(dir) / "model.safetensors").string());
    safetensors::save((fs::path(dir) / "training_state.safetensors").string(), state,
                      {{"format", "qkv-training-state-1"}});
  });
}

bool Trainer::validate_and_track() {
  if (!cb_.validate) return false;
  auto metrics = cb_.validate();
  metrics["step"] = double(step_);
  validated_step_ = step_;  // in the checkpoint below: a resume at this step need not validate again
  if (metrics_) metrics_->write(metrics, "valid");  // rank 0's (every rank validates: they agree)
  // The best and the patience count are updated before the checkpoint is written, so its training
  // state includes this validation: a run resumed from it goes on as an uninterrupted one would.
  auto it = metrics.find(cb_.best_metric);
  bool better = false;
  if (it != metrics.end()) {
    better = best_step_ == 0 ||  // the first validation (steps count from 1)
             (cb_.lower_is_better ? it->second < best_bleu_ : it->second > best_bleu_);
    if (better) {
      best_bleu_ = it->second;
      best_step_ = step_;
      bad_validations_ = 0;
    } else {
      ++bad_validations_;
    }
  }
  std::string dir = save_checkpoint();
  if (better && !dir.empty()) checkpoints_.mark_best(dir);
  return it != metrics.end() && !better && o_.patience > 0 && bad_validations_ >= o_.patience;
}

namespace {

// What every rank of a data-parallel run must agree on in its run.json (the config after the
// command line's flags, and the validation file), one hash each; all 0 without a run.json (a
// Trainer used as a library).
constexpr const char* kAgreedRunFields[] = {"model_type", "model", "tokenizer", "data",  "optimizer",
                                            "schedule",   "train", "valid",     "seed"};
std::vector<int64_t> run_json_fingerprints(const std::string& run_dir) {
  const size_t n = std::size(kAgreedRunFields);
  std::vector<int64_t> out(n + 2, 0);  // the fields, the rest of the config, the validation file
  const fs::path path = fs::path(run_dir) / "run.json";
  if (!fs::exists(path)) return out;
  const nlohmann::json j = nlohmann::json::parse(read_file(path.string()), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("config") || !j["config"].is_object()) return out;
  nlohmann::json rest = j["config"];
  const auto hash = [](const std::string& text) {
    PlanHash h;
    for (char ch : text) h.mix(uint64_t(uint8_t(ch)));
    return h.value();
  };
  for (size_t i = 0; i < n; ++i) {
    out[i] = hash(rest.contains(kAgreedRunFields[i]) ? rest[kAgreedRunFields[i]].dump() : "");
    rest.erase(kAgreedRunFields[i]);
  }
  out[n] = hash(rest.dump());
  out[n + 1] = hash(j.contains("valid") ? j["valid"].dump() : "");
  return out;
}

}  // namespace

void Trainer::start_data_parallel() {
  comm_.release_followers();  // rank 0 has prepared the run: the others may now repeat its setup
  // Every rank must start from the same weights, step and data position, under the same config.
  std::vector<int64_t> mine{parameters_fingerprint(opt_.params()), step_};
  PlanHash pos;
  for (auto& [k, v] : task_.position()) {
    for (char ch : k) pos.mix(uint64_t(uint8_t(ch)));
    pos.mix(uint64_t(v));
  }
  mine.push_back(pos.value());
  const bool bf16 = o_.precision == kernels::MatmulPrecision::bf16;
  mine.push_back(bf16 ? int64_t(kernels::bf16_products()) : -1);
  const std::vector<int64_t> run = run_json_fingerprints(run_dir_);
  mine.insert(mine.end(), run.begin(), run.end());
  const size_t n = mine.size();
  const std::vector<int64_t> all =
      comm_.all_gather(mine, "the start-up check of the ranks (after their setup)", comm_.setup_timeout_seconds());
  for (int r = 1; r < comm_.size(); ++r) {
    const int64_t* theirs = all.data() + n * size_t(r);
    // The config first: a different one (an lr, accum_steps, save_every) trained silently apart, or
    // ended in mismatched collectives, before the weights or the data told.
    for (size_t i = 0; i < run.size(); ++i) {
      const std::string what = i < std::size(kAgreedRunFields) ? std::string("config field '") + kAgreedRunFields[i] + "'"
                               : i == std::size(kAgreedRunFields) ? std::string("config (another top-level field)")
                                                                  : std::string("validation file");
      QKV_CHECK(theirs[4 + i] == all[4 + i], "distributed training", "rank ", r, "'s ", what, " differs from rank 0's "
                "(run.json, after the command line's flags): start every rank with the same --config, flags and files");
    }
    QKV_CHECK(theirs[0] == all[0], "distributed training", "rank ", r,
              "'s initial weights differ from rank 0's (the same config, seed and data on every rank are needed)");
    QKV_CHECK(theirs[1] == all[1], "distributed training", "rank ", r, " starts at step ", theirs[1], ", rank 0 at ",
              all[1], ": every rank must open the same run");
    QKV_CHECK(theirs[2] == all[2], "distributed training", "rank ", r, "'s training data or its batching differs from "
              "rank 0's (another --train file, or other data settings): every rank must read the same data");
  }
  // Every rank runs its bf16 products as rank 0 does (each timed its own CPU; the checkpoint keeps one).
  if (bf16) kernels::set_bf16_products(kernels::Bf16Products(all[3]));
  // A new run: rank r > 0 draws dropout from its own stream (rank 0 keeps the single-process one).
  if (!restored_ && comm_.rank() > 0) {
    Generator& g = default_generator();
    g.set_state(g.seed() + 0x9E3779B97F4A7C15ull * uint64_t(comm_.rank()), g.offset());
  }
}

Outcome Trainer::run() {
  fs::create_directories(run_dir_);
  install_stop_signal_handlers();
  if (!metrics_ && comm_.is_main()) metrics_.emplace(run_dir_ + "/metrics.jsonl", restored_ ? step_ : -1);
  if (comm_.distributed()) start_data_parallel();
  if (o_.precision == kernels::MatmulPrecision::bf16 && comm_.is_main()) {  // never a silent slowdown
    const kernels::PrecisionSpeed& speed = kernels::measured_precision_speed();
    const kernels::Bf16Products how = kernels::bf16_products();  // a resumed run's own (restored)
    std::fprintf(stderr,
                 "qkv train: precision bf16: a 512x1024x1024 product measured %.0f GFLOP/s against %.0f in fp32; "
                 "bf16 products: %s\n",
                 speed.bf16_gflops, speed.fp32_gflops,
                 how == kernels::Bf16Products::native
                     ? "native (oneDNN's bf16 kernel)"
                     : "fp32_fma (the fp32 GEMM on bf16-rounded operands: the same exact products, summed in f32)");
  }
  std::optional<ProgressBar> bar;  // rank 0's
  if (comm_.is_main()) bar.emplace(stderr, o_.log_every);
  int64_t total = o_.max_steps;
  auto window_start = std::chrono::steady_clock::now();
  const auto run_start = window_start;
  run_start_ = run_start;
  max_seconds_ = o_.max_minutes * 60;
  auto out_of_time = [&] {
    if (comm_.distributed()) return agreed_out_of_time_;  // as any rank saw it after the last step
    return o_.max_minutes > 0 &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count() >= o_.max_minutes * 60;
  };
  const int64_t first_step = step_;
  Outcome outcome = Outcome::finished;
  while (true) {
    if (comm_.distributed() ? agreed_stop_ : stop_requested()) { outcome = Outcome::interrupted; break; }
    if (o_.max_steps > 0 && step_ >= o_.max_steps) break;
    if (o_.max_epochs > 0 && task_.epoch() >= o_.max_epochs) break;
    if (out_of_time()) break;
    train_step();
    if (last_step_skipped_) continue;  // no update: nothing to log, save or validate
    auto now = std::chrono::steady_clock::now();
    double secs = std::chrono::duration<double>(now - window_start).count();
    tokens_per_s_ = secs > 0 ? double(last_step_tokens_) / secs : 0;
    window_start = now;
    if (metrics_)
      metrics_->write({{"step", double(step_)}, {"train_loss", last_loss_}, {"lr", opt_.lr()},
                       {"tokens_per_s", tokens_per_s_}, {"epoch", double(task_.epoch())}},
                      "train");
    if (bar) bar->update({step_, total, task_.epoch(), last_loss_, opt_.lr(), tokens_per_s_, task_.unit_name()});
    bool last = o_.max_steps > 0 && step_ >= o_.max_steps;
    if (o_.valid_every > 0 && step_ % o_.valid_every == 0 && !last) {
      if (bar) bar->message("validating at step " + std::to_string(step_) + " ...");
      if (validate_and_track()) { outcome = Outcome::early_stopped; break; }
    } else if (o_.save_every > 0 && step_ % o_.save_every == 0 && !last) {
      save_checkpoint();
    }
  }
  if (bar) bar->finish();
  if (allreduce_ && comm_.is_main() && step_seconds_ > 0)
    std::fprintf(stderr, "qkv train: %d ranks; gradient all-reduce of %.3g MB per step: %.1f%% of the steps' time\n",
                 comm_.size(), double(allreduce_->bytes_per_step()) / 1e6, 100 * allreduce_->seconds() / step_seconds_);
  const bool validated = !cb_.validate || validated_step_ == step_;
  if (restored_ && step_ == first_step && (outcome == Outcome::interrupted || validated)) {
    // A resumed run already at its end, whose checkpoint was validated (or interrupted before a
    // step): that checkpoint stands as it is. Validating again appended a second metrics line and
    // counted one more validation without progress toward train.patience in the checkpoint it
    // rewrote, so the run no longer matched the one that was never resumed. A checkpoint saved
    // without validation (save_every, or a SIGTERM in the last step) is validated as the end of
    // the run, as before.
    if (comm_.is_main())
      std::fprintf(stderr, "qkv train: %s at step %lld: nothing trained or written\n",
                   outcome == Outcome::interrupted ? "interrupted before an update" : "the run already ends",
                   (long long)step_);
    return outcome;
  }
  if (outcome == Outcome::finished) {
    if (cb_.validate) validate_and_track();  // validates, saves, tracks the best
    else save_checkpoint();
  } else if (outcome == Outcome::interrupted) {
    save_checkpoint();  // SIGINT/SIGTERM: keep everything, exit cleanly
  }  // early_stopped: the validation that stopped training saved its checkpoint
  return outcome;
}

}  // namespace qkv::train
