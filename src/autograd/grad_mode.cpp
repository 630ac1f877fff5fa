#include "mixprec/autograd.h"

namespace mixprec {

namespace {
thread_local bool grad_enabled = true;
}

bool is_grad_enabled() { return grad_enabled; }

NoGradScope::NoGradScope() : previous_(grad_enabled) { grad_enabled = false; }
NoGradScope::~NoGradScope() { grad_enabled = previous_; }

}  // namespace mixprec
