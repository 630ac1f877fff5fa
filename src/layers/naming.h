// Unique automatic layer names, Keras style: the first Dense is "dense", then "dense_1", "dense_2".
// Names given explicitly are remembered too, so an automatic name never repeats one of them.
#pragma once

#include <string>
#include <string_view>

namespace mixprec::layers::detail {

// "InputLayer" -> "input_layer", "Dense" -> "dense".
std::string snake_case(std::string_view class_name);
// The next unused name for `prefix`, marked as used.
std::string unique_name(const std::string& prefix);
// Marks an explicitly given name as used.
void reserve_name(const std::string& name);

}  // namespace mixprec::layers::detail
