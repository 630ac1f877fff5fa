// The op vocabulary shared by the ops and every backend: which elementwise, comparison, reduction,
// softmax and pooling operation is meant. Each list is an X-macro (like MIXPREC_FOR_EACH_DTYPE in
// mixprec/dtype.h): the enum and its names are generated from it, so adding an entry is one line
// here plus its kernels. Accumulation (mixprec/ops.h: float32 or the compute dtype) is the one
// spelling of how a 16-bit reduction accumulates, for every op and backend.
#pragma once

// X(enumerator, "name in messages"): one entry per operation, in enum order.
// clang-format off
#define MIXPREC_FOR_EACH_BINARY_OP(X) \
  X(add, "add") \
  X(sub, "sub") \
  X(mul, "mul") \
  X(div, "div") \
  X(pow, "pow") \
  X(maximum, "maximum") \
  X(minimum, "minimum")
#define MIXPREC_FOR_EACH_UNARY_OP(X) \
  X(neg, "neg") \
  X(exp, "exp") \
  X(log, "log") \
  X(sqrt, "sqrt") \
  X(rsqrt, "rsqrt") \
  X(abs, "abs") \
  X(relu, "relu") \
  X(relu6, "relu6") \
  X(sigmoid, "sigmoid") \
  X(tanh, "tanh") \
  X(gelu, "gelu") \
  X(gelu_tanh, "gelu(tanh)") \
  X(silu, "silu")
#define MIXPREC_FOR_EACH_COMPARE_OP(X) \
  X(equal, "equal") \
  X(not_equal, "not_equal") \
  X(less, "less") \
  X(less_equal, "less_equal") \
  X(greater, "greater") \
  X(greater_equal, "greater_equal")
#define MIXPREC_FOR_EACH_REDUCE_OP(X) \
  X(sum, "sum") \
  X(max, "max")
#define MIXPREC_FOR_EACH_SOFTMAX_KIND(X) \
  X(softmax, "softmax") \
  X(log_softmax, "log_softmax")
#define MIXPREC_FOR_EACH_POOL_KIND(X) \
  X(max, "max") \
  X(average, "average")
// clang-format on

namespace mixprec {

#define MIXPREC_OP_ENUM_ENTRY(name, text) name,
#define MIXPREC_OP_NAME_CASE(name, text) \
  case Kind::name: return text;

// enum class <Enum> { entries... } and `const char* op_name(<Enum>)` (the name in messages: "add",
// "gelu(tanh)", ...).
#define MIXPREC_DEFINE_OP_KIND(Enum, LIST)         \
  enum class Enum { LIST(MIXPREC_OP_ENUM_ENTRY) }; \
  constexpr const char* op_name(Enum kind) {       \
    using Kind = Enum;                             \
    switch (kind) { LIST(MIXPREC_OP_NAME_CASE) }   \
    return "unknown";                              \
  }

MIXPREC_DEFINE_OP_KIND(BinaryOp, MIXPREC_FOR_EACH_BINARY_OP)
MIXPREC_DEFINE_OP_KIND(UnaryOp, MIXPREC_FOR_EACH_UNARY_OP)
MIXPREC_DEFINE_OP_KIND(CompareOp, MIXPREC_FOR_EACH_COMPARE_OP)
MIXPREC_DEFINE_OP_KIND(ReduceOp, MIXPREC_FOR_EACH_REDUCE_OP)
MIXPREC_DEFINE_OP_KIND(SoftmaxKind, MIXPREC_FOR_EACH_SOFTMAX_KIND)
MIXPREC_DEFINE_OP_KIND(PoolKind, MIXPREC_FOR_EACH_POOL_KIND)

#undef MIXPREC_DEFINE_OP_KIND
#undef MIXPREC_OP_NAME_CASE
#undef MIXPREC_OP_ENUM_ENTRY

}  // namespace mixprec
