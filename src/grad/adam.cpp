// The Adam optimizer: each update is two fused lazy chains per parameter.
#include <gizml/grad.h>

#include <cmath>

#include "grad/graph_state.h"

namespace gizml::grad {

using tensor::lazy;
using tensor::Lazy;

Adam::Adam(double lr, double beta1, double beta2, double eps) : lr_(lr), beta1_(beta1), beta2_(beta2), eps_(eps) {}

void Adam::step(std::vector<Tensor>& params, const std::vector<Tensor>& grads) {
  check(params.size() == grads.size(), "Adam.step: " + std::to_string(params.size()) + " parameters but " +
                                           std::to_string(grads.size()) + " gradients");
  if (m_.empty()) {
    for (const Tensor& p : params) {  // the moments in f32 (f64 for F64 parameters)
      const DType moments = p.dtype() == DType::F64 ? DType::F64 : DType::F32;
      m_.push_back(placedLike(tensor::zeros(p.shape(), moments), p));
      v_.push_back(placedLike(tensor::zeros(p.shape(), moments), p));
    }
  }
  check(m_.size() == params.size(), "Adam.step: the number of parameters changed");
  ++t_;
  const double c1 = 1.0 - std::pow(beta1_, static_cast<double>(t_));
  const double c2 = 1.0 - std::pow(beta2_, static_cast<double>(t_));
  for (size_t i = 0; i < params.size(); ++i) {
    check(grads[i].shape() == params[i].shape(), "Adam.step: gradient " + std::to_string(i) + " has shape " +
                                                     tensor::shapeText(grads[i].shape()) + ", its parameter " +
                                                     tensor::shapeText(params[i].shape()));
    const Lazy g = lazy(grads[i]);
    m_[i] = (lazy(m_[i]) * beta1_ + g * (1.0 - beta1_)).eval();
    v_[i] = (lazy(v_[i]) * beta2_ + g * g * (1.0 - beta2_)).eval();
    params[i] = (lazy(params[i]) - (lazy(m_[i]) / c1) * lr_ / ((lazy(v_[i]) / c2).sqrt() + eps_)).eval();
  }
}

}  // namespace gizml::grad
