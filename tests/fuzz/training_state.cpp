// Fuzz target: training_state.safetensors, restored into a trainer (Adam over two parameters,
// a data stream over four batches in train::BatchOrder), which then takes one step.
#include "fuzz_target.h"
#include "qkv/ops/elementwise.h"
#include "qkv/ops/reduce.h"
#include "qkv/train/batch_order.h"
#include "qkv/train/trainer.h"

namespace {

class Model : public qkv::nn::Module {
 public:
  Model() {
    w = register_parameter("w", qkv::Tensor::from_vector<float>({0.5f, -1.0f, 2.0f}, {3}));
    b = register_parameter("b", qkv::Tensor::from_vector<float>({0.25f}, {1}));
  }
  qkv::Tensor w, b;
};

// Four batches, visited in the order BatchOrder gives (seed 7, plan fingerprint 99).
class Task : public qkv::train::TrainingTask {
 public:
  qkv::nn::Module& model() override { return model_; }
  MicroBatch next() override {
    const size_t i = order_.next();
    if (i >= 4) qkv::fuzz::bug("BatchOrder::next returned batch " + std::to_string(i) + " of 4");
    const float s = 1.0f + float(i);
    qkv::Tensor x = qkv::Tensor::from_vector<float>({s, -s, 0.5f}, {3});
    MicroBatch b;
    b.units = 1;
    b.summed_loss = [this, x](double) { return qkv::sum(model_.w * x) + qkv::sum(model_.b); };
    return b;
  }
  int64_t epoch() const override { return order_.epoch(); }
  std::map<std::string, int64_t> position() const override { return order_.position(); }
  void restore(const std::map<std::string, int64_t>& p) override { order_.restore(p); }
  Model model_;

 private:
  qkv::train::BatchOrder order_{4, 7, 99, "fuzz stream"};
};

}  // namespace

QKV_FUZZ_TARGET(training_state) {
  const std::string file = qkv::fuzz::scratch_file("checkpoint/training_state.safetensors", data, size);
  Task task;
  qkv::ParamGroup group;
  group.params = task.model_.parameters();
  qkv::Adam opt({group}, 1e-3);
  qkv::ConstantLR schedule(1e-3);
  qkv::train::TrainOptions o;
  o.max_steps = 1;
  qkv::train::Trainer trainer(task, opt, schedule, o, qkv::fuzz::scratch_dir() + "/run", {});
  qkv::fuzz::expect_clean(file, [&] {
    trainer.restore_training_state(qkv::fuzz::scratch_dir() + "/checkpoint");
    trainer.train_step();
  });
  return 0;
}
