// nn::Module: named parameters, buffers and submodules (include/ingot/nn.h), and the generator
// that initialisation, dropout and shuffling draw from.
#include <ingot/autograd.h>
#include <ingot/nn.h>

#include <mutex>
#include <random>
#include <set>

#include "core/strings.h"

namespace ingot {
namespace {

struct Generator {
  std::mutex mutex;
  std::mt19937_64 engine{5489u};
};
Generator& generator() {
  static Generator g;
  return g;
}

}  // namespace

void manual_seed(uint64_t seed) {
  std::lock_guard lock(generator().mutex);
  generator().engine.seed(seed);
}

uint64_t random_u64() {
  std::lock_guard lock(generator().mutex);
  return generator().engine();
}

namespace nn {

void Module::register_parameter(const std::string& name, Tensor& member) {
  if (!member.defined()) fail("register_parameter '{}': the tensor is undefined", name);
  if (!is_floating(member.dtype())) fail("register_parameter '{}': parameters are float, got {}", name, member.describe());
  if (!member.requires_grad()) member.set_requires_grad(true);
  params_.emplace_back(name, &member);
}

void Module::register_buffer(const std::string& name, Tensor& member) { buffers_.emplace_back(name, &member); }

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  if (!module) fail("register_module '{}': the module is null", name);
  children_.emplace_back(name, std::move(module));
}

void Module::collect(const std::string& prefix, bool params, std::vector<std::pair<std::string, Tensor*>>& out) const {
  for (const auto& [name, slot] : params ? params_ : buffers_) {
    if (slot->defined()) out.emplace_back(prefix + name, slot);
  }
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", params, out);
}

std::vector<std::pair<std::string, Tensor*>> Module::slots(bool params) const {
  std::vector<std::pair<std::string, Tensor*>> out;
  collect("", params, out);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, slot] : slots(true)) out.emplace_back(name, *slot);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (const auto& [name, slot] : slots(true)) out.push_back(*slot);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, slot] : slots(false)) out.emplace_back(name, *slot);
  return out;
}

std::map<std::string, Tensor> Module::state_dict() const {
  std::map<std::string, Tensor> out;
  for (bool params : {true, false}) {
    for (const auto& [name, slot] : slots(params)) out[name] = slot->detach();
  }
  return out;
}

void Module::load_state_dict(const std::map<std::string, Tensor>& state, bool strict) {
  std::set<std::string> used;
  for (bool params : {true, false}) {
    for (const auto& [name, slot] : slots(params)) {
      auto it = state.find(name);
      if (it == state.end()) {
        if (strict) fail("load_state_dict: no value for '{}' ({})", name, slot->describe());
        continue;
      }
      const Tensor& v = it->second;
      if (v.shape() != slot->shape())
        fail("load_state_dict: '{}' is {}, the value given is {}", name, slot->describe(), v.describe());
      Tensor host = v.to(Device::cpu());
      if (host.dtype() != slot->dtype()) host = host.cast(slot->dtype());
      copy_tensor(host, *slot);
      used.insert(name);
    }
  }
  if (strict) {
    for (const auto& [name, v] : state) {
      if (!used.count(name)) fail("load_state_dict: '{}' is not a parameter or buffer of this module", name);
    }
  }
}

void Module::train(bool on) {
  training_ = on;
  for (const auto& [name, child] : children_) child->train(on);
}

void Module::to(Device device) {
  for (bool params : {true, false}) {
    for (const auto& [name, slot] : slots(params)) {
      if (slot->device() == device) continue;
      Tensor moved = slot->detach().to(device);
      if (params) moved.set_requires_grad(true);
      *slot = moved;
    }
  }
}

void Module::to(DType dtype) {
  if (!is_floating(dtype)) fail("Module::to: {} is not a float dtype", dtype_name(dtype));
  for (bool params : {true, false}) {
    for (const auto& [name, slot] : slots(params)) {
      if (!is_floating(slot->dtype()) || slot->dtype() == dtype) continue;
      const Device device = slot->device();
      Tensor converted = slot->detach().to(Device::cpu()).cast(dtype).to(device);
      if (params) converted.set_requires_grad(true);
      *slot = converted;
    }
  }
}

void Module::zero_grad() {
  for (const auto& [name, slot] : slots(true)) slot->set_grad(Tensor());
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const auto& [name, slot] : slots(true)) n += slot->numel();
  return n;
}

Sequential::Sequential(std::initializer_list<std::shared_ptr<Layer>> layers) {
  for (const auto& l : layers) add(l);
}

Sequential::Sequential(const std::vector<std::shared_ptr<Layer>>& layers) {
  for (const auto& l : layers) add(l);
}

Sequential& Sequential::add(std::shared_ptr<Layer> layer) {
  register_module(std::to_string(layers_.size()), layer);
  layers_.push_back(std::move(layer));
  return *this;
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (const auto& l : layers_) h = l->forward(h);
  return h;
}

}  // namespace nn
}  // namespace ingot
