#include "core/nn/module.h"

#include <map>
#include <sstream>

#include "core/error.h"
#include "core/io/safetensors.h"

namespace tl::nn {

void Module::register_parameter(const std::string& name, Tensor& slot) {
  if (slot.defined()) slot.requires_grad(true);
  params_.push_back({name, &slot});
}
void Module::register_buffer(const std::string& name, Tensor& slot) { buffers_.push_back({name, &slot}); }
void Module::register_module(const std::string& name, std::shared_ptr<Module> child) {
  if (!child) throw std::invalid_argument("register_module: child '" + name + "' is null");
  children_.push_back({name, std::move(child)});
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, c] : children_) c->train(on);
}

void Module::collect(const std::string& prefix, bool parameters, std::vector<std::pair<std::string, Tensor*>>& out) {
  for (auto& [name, slot] : parameters ? params_ : buffers_)
    if (slot->defined()) out.push_back({prefix + name, slot});
  for (auto& [name, c] : children_) c->collect(prefix + name + ".", parameters, out);
}

std::vector<std::pair<std::string, Tensor*>> Module::named_parameters() {
  std::vector<std::pair<std::string, Tensor*>> out;
  collect("", true, out);
  return out;
}
std::vector<std::pair<std::string, Tensor*>> Module::named_buffers() {
  std::vector<std::pair<std::string, Tensor*>> out;
  collect("", false, out);
  return out;
}
std::vector<Tensor*> Module::parameters() {
  std::vector<Tensor*> out;
  for (auto& [name, p] : named_parameters()) out.push_back(p);
  return out;
}
int64_t Module::parameter_count() {
  int64_t n = 0;
  for (auto* p : parameters()) n += p->numel();
  return n;
}

StateDict Module::state_dict() {
  StateDict out;
  auto put = [&](const std::string& name, Tensor* t) {
    HostTensor h;
    h.shape = t->shape();
    h.dtype = is_float(t->dtype()) ? "F32" : "I32";  // HostTensor holds floats
    h.data = t->to_vector();
    out[name] = std::move(h);
  };
  for (auto& [name, t] : named_parameters()) put(name, t);
  for (auto& [name, t] : named_buffers()) put(name, t);
  return out;
}

void Module::load_state_dict(const StateDict& state) {
  auto params = named_parameters(), buffers = named_buffers();
  std::map<std::string, Shape> expected;
  for (auto& [name, t] : params) expected[name] = t->shape();
  for (auto& [name, t] : buffers) expected[name] = t->shape();
  check_state_dict(state, expected);
  auto assign = [&](const std::string& name, Tensor* t, bool grad) {
    const HostTensor& h = state.at(name);
    Tensor v = Tensor::from_data(h.data, h.shape, t->device());
    if (t->dtype() != DType::f32) v = v.cast(t->dtype());
    v.realize();
    if (grad) v.requires_grad(true);
    *t = v;
  };
  for (auto& [name, t] : params) assign(name, t, true);
  for (auto& [name, t] : buffers) assign(name, t, false);
}

void Module::save(const std::string& path) { save_safetensors(path, state_dict()); }
void Module::load(const std::string& path) { load_state_dict(load_safetensors(path)); }

void Module::to(const std::string& device) {
  for (auto& [name, t] : named_parameters()) {
    Tensor v = t->detach().to(device);
    v.realize();
    *t = v.detach();
    t->requires_grad(true);
  }
  for (auto& [name, t] : named_buffers()) {
    Tensor v = t->to(device);
    v.realize();
    *t = v;
  }
}

Sequential& Sequential::add(std::shared_ptr<Module> m) {
  register_module(std::to_string(children().size()), std::move(m));
  return *this;
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (auto& [name, c] : children()) {
    Scope scope(name + "." + c->type_name());
    y = c->forward(y);
  }
  return y;
}

std::string describe(Module& m) {
  std::ostringstream os;
  for (auto& [name, c] : m.children()) {
    int64_t n = c->parameter_count();
    os << "  " << name << ": " << c->type_name();
    if (n) os << " (" << n << " parameters)";
    os << "\n";
  }
  os << "  total: " << m.parameter_count() << " parameters\n";
  return os.str();
}

}  // namespace tl::nn
