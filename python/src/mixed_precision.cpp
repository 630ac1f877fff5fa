// mixprec.mixed_precision: Policy, the global policy, the accumulation switches, the device's
// recommended policy. (LossScaleOptimizer is an optimizer: training.cpp.)
#include <sstream>

#include "bindings.h"

namespace mixprec::python {

void bind_mixed_precision(py::module_& m) {
  using mixed_precision::Policy;
  py::class_<Policy>(m, "Policy", R"doc(
A dtype policy (keras.mixed_precision.Policy): the dtype a layer computes in and the dtype of its
variables. 'mixed_float16' = (float16, float32), 'mixed_bfloat16' = (bfloat16, float32);
'float32', 'float16', 'bfloat16', 'float64' = (same, same). Any other name is a ValueError that
lists the valid names.)doc")
      .def(py::init<const std::string&>(), py::arg("name"))
      .def_property_readonly("name", &Policy::name)
      .def_property_readonly(
          "compute_dtype",
          [](const Policy& p) { return std::string(dtype_name(p.compute_dtype())); })
      .def_property_readonly(
          "variable_dtype",
          [](const Policy& p) { return std::string(dtype_name(p.variable_dtype())); })
      .def_property_readonly("is_mixed", &Policy::is_mixed)
      .def("__eq__", [](const Policy& a, const Policy& b) { return a == b; })
      .def("__eq__", [](const Policy& a, const std::string& b) { return a.name() == b; })
      .def("__hash__", [](const Policy& p) { return py::hash(py::str(p.name())); })
      .def("__repr__", [](const Policy& p) { return "<Policy \"" + p.name() + "\">"; })
      .def_static("valid_names", &Policy::valid_names);

  m.def(
      "set_global_policy",
      [](py::object policy) {
        mixed_precision::set_global_policy(policy.is_none() ? Policy("float32")
                                                            : *to_policy(policy));
      },
      py::arg("policy"),
      "Sets the policy of layers created from now on (a name, a Policy, or None for float32).");
  m.def("global_policy", &mixed_precision::global_policy);
  m.def("fp16_matmul_use_fp32_compute", &mixed_precision::fp16_matmul_use_fp32_compute);
  m.def("fp16_conv_use_fp32_compute", &mixed_precision::fp16_conv_use_fp32_compute);
  m.def("set_fp16_matmul_use_fp32_compute", &mixed_precision::set_fp16_matmul_use_fp32_compute,
        py::arg("enabled"));
  m.def("set_fp16_conv_use_fp32_compute", &mixed_precision::set_fp16_conv_use_fp32_compute,
        py::arg("enabled"));
  m.def(
      "pick_policy_for_device",
      [] {
        auto choice = mixed_precision::pick_policy_for_device();
        return py::make_tuple(choice.policy, choice.reason);
      },
      "(policy, reason): mixed_float16 on an NVIDIA GPU of compute capability >= 7.0, "
      "mixed_bfloat16 on a CPU with native bfloat16, float32 otherwise.");
}

}  // namespace mixprec::python
