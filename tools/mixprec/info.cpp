// `mixprec info`: the devices (as list_physical_devices sees them), what this build contains, and
// the policy pick_policy_for_device() recommends here, with its reason and the slow-policy
// warnings of DESIGN §2.6, and this process's place in a data-parallel group (rank, world size).
#include <omp.h>

#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "mixprec/mixprec.h"
#include "report.h"

namespace mixprec::cli {

namespace {

const char* yes_no(bool value) { return value ? "yes" : "no"; }

std::string format_memory(std::int64_t bytes) {
  if (bytes <= 0) return "unknown";
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", static_cast<double>(bytes) / (1 << 30));
  return text;
}

std::string join_features(const std::vector<std::string>& features) {
  std::string out;
  for (const auto& f : features) out += (out.empty() ? "" : " ") + f;
  return out.empty() ? "-" : out;
}

nlohmann::ordered_json distributed_json() {
  return {{"world_size", distributed::world_size()}, {"rank", distributed::rank()},
          {"local_rank", distributed::local_rank()}, {"describe", distributed::describe()},
          {"mpi", distributed::built_with_mpi()},    {"nccl", distributed::built_with_nccl()}};
}

void run_info(const std::string& json_path, const Invocation& invocation) {
  const auto devices = list_physical_devices();
  const auto choice = mixed_precision::pick_policy_for_device(devices);
  const bool cuda_built = MIXPREC_HAVE_CUDA;
  const bool cuda_toolkit = MIXPREC_CUDA_TOOLKIT;

  std::printf("mixprec %s\n", mixprec::version());
  std::printf(
      "build: CPU backend (oneDNN, %d OpenMP threads); CUDA backend: %s\n", omp_get_max_threads(),
      cuda_built     ? "compiled in"
      : cuda_toolkit ? "not built (a CUDA toolkit was found, but the backend is not part of "
                       "this build)"
                     : "not built");
  std::printf("distributed: world size %d, rank %d, local rank %d; %s; MPI %s, NCCL %s\n",
              distributed::world_size(), distributed::rank(), distributed::local_rank(),
              distributed::describe().c_str(),
              distributed::built_with_mpi() ? "built in" : "not built",
              distributed::built_with_nccl() ? "built in" : "not built");
  std::printf("devices:\n");
  nlohmann::ordered_json device_list = nlohmann::ordered_json::array();
  for (const auto& d : devices) {
    std::printf("  %-8s %s %s\n", d.device.to_string().c_str(), d.kind.c_str(), d.name.c_str());
    if (d.kind == "GPU") {
      std::printf("           compute capability %d.%d\n", d.compute_capability_major,
                  d.compute_capability_minor);
    }
    std::printf("           memory %s; native float16 %s; native bfloat16 %s\n",
                format_memory(d.memory_bytes).c_str(), yes_no(d.native_float16),
                yes_no(d.native_bfloat16));
    if (d.kind == "CPU") {
      std::printf("           16-bit features: %s\n", join_features(d.features).c_str());
    }
    nlohmann::ordered_json entry = {{"device", d.device.to_string()},
                                    {"kind", d.kind},
                                    {"name", d.name},
                                    {"memory_bytes", d.memory_bytes},
                                    {"native_float16", d.native_float16},
                                    {"native_bfloat16", d.native_bfloat16},
                                    {"features", d.features}};
    if (d.kind == "GPU") {
      entry["compute_capability"] = std::to_string(d.compute_capability_major) + "." +
                                    std::to_string(d.compute_capability_minor);
    }
    device_list.push_back(entry);
  }
  std::printf("recommended policy: %s\n  %s\n", choice.policy.name().c_str(),
              choice.reason.c_str());
  nlohmann::ordered_json notes = nlohmann::ordered_json::object();
  for (const char* name : {"mixed_float16", "mixed_bfloat16"}) {
    const std::string warning =
        mixed_precision::policy_compatibility_warning(mixed_precision::Policy(name), devices);
    std::printf("%s: %s\n", name, warning.empty() ? "runs at full speed here" : warning.c_str());
    notes[name] = warning;
  }
  if (!json_path.empty() && distributed::rank() == 0) {  // rank 0 writes files
    write_json(json_path, {{"command", invocation.command_line},
                           {"mixprec_version", mixprec::version()},
                           {"cuda_backend", cuda_built},
                           {"openmp_threads", omp_get_max_threads()},
                           {"distributed", distributed_json()},
                           {"devices", device_list},
                           {"recommended_policy", choice.policy.name()},
                           {"reason", choice.reason},
                           {"policy_warnings", notes}});
  }
}

}  // namespace

Command add_info_command(CLI::App& app, const Invocation& invocation) {
  auto* sub = app.add_subcommand(
      "info", "devices, compute capability, float16/bfloat16 support, recommended policy");
  auto json_path = std::make_shared<std::string>();
  sub->add_option("--json", *json_path, "also write the information to this JSON file");
  return {sub, [json_path, &invocation] { run_info(*json_path, invocation); }};
}

}  // namespace mixprec::cli
