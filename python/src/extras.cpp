// The rest of the module: the model zoo (applications), the data readers, distributed training,
// the physical devices, seeding, and the text of `python3 -m mixprec info`.
#include <sstream>

#include "bindings.h"

namespace mixprec::python {

namespace {

void bind_applications(py::module_& m) {
  using namespace applications;
  m.def(
      "mlp",
      [](std::int64_t units, int hidden_layers, std::int64_t input_features, std::int64_t classes,
         const std::string& activation, py::object dtype, const std::string& name) {
        return mlp(MlpOptions{units, hidden_layers, input_features, classes, activation,
                              to_policy(dtype), name});
      },
      py::arg("units") = 512, py::arg("hidden_layers") = 2, py::arg("input_features") = 784,
      py::arg("classes") = 10, py::arg("activation") = "relu", py::arg("dtype") = py::none(),
      py::arg("name") = "mlp");
  m.def(
      "cnn",
      [](std::int64_t input_size, std::int64_t channels, std::int64_t classes, py::object dtype,
         const std::string& name) {
        return cnn(CnnOptions{input_size, channels, classes, to_policy(dtype), name});
      },
      py::arg("input_size") = 28, py::arg("channels") = 1, py::arg("classes") = 10,
      py::arg("dtype") = py::none(), py::arg("name") = "cnn");
  auto image_options = [](std::int64_t input_size, std::int64_t channels, std::int64_t classes,
                          bool include_top, py::object dtype, py::object name) {
    ImageModelOptions o;
    o.input_size = input_size;
    o.channels = channels;
    o.classes = classes;
    o.include_top = include_top;
    o.dtype = to_policy(dtype);
    o.name = str_or_empty(name);
    return o;
  };
  m.def(
      "efficientnet",
      [image_options](int variant, std::int64_t input_size, std::int64_t channels,
                      std::int64_t classes, bool include_top, py::object dtype, py::object name) {
        if (input_size <= 0) input_size = efficientnet_default_input_size(variant);
        return efficientnet(variant,
                            image_options(input_size, channels, classes, include_top, dtype, name));
      },
      py::arg("variant"), py::arg("input_size") = 0, py::arg("channels") = 3,
      py::arg("classes") = 1000, py::arg("include_top") = true, py::arg("dtype") = py::none(),
      py::arg("name") = py::none());
  m.def(
      "resnet50",
      [image_options](std::int64_t input_size, std::int64_t channels, std::int64_t classes,
                      bool include_top, py::object dtype, py::object name) {
        return resnet50(image_options(input_size, channels, classes, include_top, dtype, name));
      },
      py::arg("input_size") = 224, py::arg("channels") = 3, py::arg("classes") = 1000,
      py::arg("include_top") = true, py::arg("dtype") = py::none(), py::arg("name") = py::none());
  m.def("gpt_preset_names", &gpt_preset_names);
  m.def(
      "gpt",
      [](py::object preset, py::object layers, py::object width, py::object heads,
         py::object context, py::object vocab, py::object dropout, py::object dtype,
         const std::string& name) {
        GptConfig c = preset.is_none() ? GptConfig{} : gpt_preset(preset.cast<std::string>());
        if (!layers.is_none()) c.layers = layers.cast<int>();
        if (!width.is_none()) c.width = width.cast<std::int64_t>();
        if (!heads.is_none()) c.heads = heads.cast<int>();
        if (!context.is_none()) c.context = context.cast<std::int64_t>();
        if (!vocab.is_none()) c.vocab = vocab.cast<std::int64_t>();
        if (!dropout.is_none()) c.dropout = dropout.cast<double>();
        c.dtype = to_policy(dtype);
        c.name = name;
        return gpt(c);
      },
      py::arg("preset") = py::none(), py::arg("layers") = py::none(), py::arg("width") = py::none(),
      py::arg("heads") = py::none(), py::arg("context") = py::none(), py::arg("vocab") = py::none(),
      py::arg("dropout") = py::none(), py::arg("dtype") = py::none(), py::arg("name") = "gpt");
  m.def(
      "vit",
      [](std::int64_t image_size, std::int64_t channels, std::int64_t patch_size,
         std::int64_t width, int layers, int heads, std::int64_t mlp_dim, std::int64_t classes,
         double dropout, const std::string& pooling, py::object dtype, const std::string& name) {
        VitConfig c;
        c.image_size = image_size;
        c.channels = channels;
        c.patch_size = patch_size;
        c.width = width;
        c.layers = layers;
        c.heads = heads;
        c.mlp_dim = mlp_dim;
        c.classes = classes;
        c.dropout = dropout;
        c.pooling = pooling;
        c.dtype = to_policy(dtype);
        c.name = name;
        return vit(c);
      },
      py::arg("image_size") = 28, py::arg("channels") = 1, py::arg("patch_size") = 4,
      py::arg("width") = 64, py::arg("layers") = 4, py::arg("heads") = 4, py::arg("mlp_dim") = 128,
      py::arg("classes") = 10, py::arg("dropout") = 0.0, py::arg("pooling") = "mean",
      py::arg("dtype") = py::none(), py::arg("name") = "vit");
  m.def(
      "generate",
      [](const Model& model, const std::vector<std::int64_t>& prompt, std::int64_t max_tokens,
         double temperature, std::int64_t top_k, std::uint64_t seed,
         std::optional<std::int64_t> stop_token) {
        py::gil_scoped_release release;
        return generate(model, prompt,
                        GenerateOptions{.max_tokens = max_tokens,
                                        .temperature = temperature,
                                        .top_k = top_k,
                                        .seed = seed,
                                        .stop_token = stop_token});
      },
      py::arg("model"), py::arg("prompt"), py::arg("max_tokens") = 64, py::arg("temperature") = 1.0,
      py::arg("top_k") = 0, py::arg("seed") = 0, py::arg("stop_token") = py::none(),
      "The prompt's ids followed by up to max_tokens generated ones (a key-value cache; past the "
      "context the window slides). temperature 0 is greedy; top_k 0 samples among all tokens.");
  m.def(
      "load_gpt2_huggingface",
      [](const std::string& path, py::object dtype, const std::string& name) {
        return load_gpt2_huggingface(path, {.dtype = to_policy(dtype), .name = name});
      },
      py::arg("path"), py::arg("dtype") = py::none(), py::arg("name") = "gpt2",
      "A GPT from a Hugging Face GPT-2 directory (config.json, model.safetensors).");
  m.def(
      "save_gpt2_huggingface",
      [](const Model& model, const std::string& dir, const std::string& prefix) {
        save_gpt2_huggingface(model, dir, {.prefix = prefix});
      },
      py::arg("model"), py::arg("dir"), py::arg("prefix") = "transformer.",
      "Writes dir/model.safetensors and dir/config.json in Hugging Face's GPT-2 layout.");
}

void bind_data(py::module_& m) {
  // Text: the tokenizers (encode to a list of ids, decode to bytes) and token files as NumPy.
  py::class_<data::Tokenizer>(m, "Tokenizer")
      .def_property_readonly("name", &data::Tokenizer::name)
      .def_property_readonly("vocab_size", &data::Tokenizer::vocab_size)
      .def_property_readonly("end_of_text", &data::Tokenizer::end_of_text)
      .def("encode", &data::Tokenizer::encode, py::arg("text"))
      .def(
          "decode",
          [](const data::Tokenizer& t, const std::vector<std::int32_t>& ids) {
            return py::bytes(t.decode(ids));
          },
          py::arg("ids"));
  py::class_<data::ByteTokenizer, data::Tokenizer>(m, "ByteTokenizer").def(py::init<>());
  py::class_<data::Gpt2Tokenizer, data::Tokenizer>(m, "Gpt2Tokenizer")
      .def(py::init<const std::string&, const std::string&>(), py::arg("encoder_json"),
           py::arg("vocab_bpe"));
  py::class_<TokenWindows>(m, "TokenWindows",
                           "Windows of a TokenDataset (train_windows, validation_windows): fit, "
                           "evaluate and predict take them as x, fit as validation_data; each "
                           "batch's tokens are read from the mapped file when it is trained. "
                           "Iterating gives (x, y) NumPy batches in stored order.")
      .def_property_readonly("context", [](const TokenWindows& w) { return w.context; })
      .def_property_readonly("batch_size", [](const TokenWindows& w) { return w.batch_size; })
      .def_property_readonly("steps_per_epoch",
                             [](const TokenWindows& w) { return w.steps_per_epoch; })
      .def("__len__", [](const TokenWindows& w) { return w.pipeline.size(); })
      .def(
          "batch",
          [](const TokenWindows& w, std::int64_t start, std::int64_t stop) {
            const data::Batch b = w.pipeline.batch(start, stop);
            return py::make_tuple(to_numpy(b.x), to_numpy(b.y));
          },
          py::arg("start"), py::arg("stop"),
          "x (stop - start, context) and y int32: windows [start, stop) in stored order.")
      .def("__repr__", [](const TokenWindows& w) {
        return "<TokenWindows " + std::to_string(w.pipeline.size()) + " windows of " +
               std::to_string(w.context) + " tokens>";
      });
  // A token file, memory-mapped (or token ids held in memory): windows by their start offsets as
  // NumPy (x, y) pairs, y being x shifted by one token, or as TokenWindows pipelines for fit.
  py::class_<data::TokenDataset>(m, "TokenDataset")
      .def(py::init([](const std::string& path, double validation_fraction) {
             return data::TokenDataset(path, {.validation_fraction = validation_fraction});
           }),
           py::arg("path"), py::arg("validation_fraction") = 0.0)
      .def_static(
          "from_tokens",
          [](const std::vector<std::int32_t>& ids, std::int64_t vocab_size,
             double validation_fraction) {
            return data::TokenDataset(ids, vocab_size,
                                      {.validation_fraction = validation_fraction});
          },
          py::arg("ids"), py::arg("vocab_size"), py::arg("validation_fraction") = 0.0,
          "Token ids held in memory (e.g. text encoded by a tokenizer), checked as a file's.")
      .def(
          "train_windows",
          [](const data::TokenDataset& d, std::int64_t context, std::int64_t batch_size,
             std::optional<std::int64_t> steps_per_epoch, std::int64_t epochs, std::uint64_t seed) {
            const data::TokenWindowOptions o{.context = context,
                                             .batch_size = batch_size,
                                             .steps_per_epoch = steps_per_epoch,
                                             .epochs = epochs,
                                             .seed = seed};
            return TokenWindows{d.train_windows(o), context, batch_size, d.steps_per_epoch(o)};
          },
          py::arg("context"), py::arg("batch_size") = 32, py::arg("steps_per_epoch") = py::none(),
          py::arg("epochs") = 1, py::arg("seed") = 0,
          "batch_size * steps_per_epoch * epochs windows of context + 1 tokens drawn from the "
          "training part (starts uniform, from seed); fit takes batch_size and steps_per_epoch "
          "from them. steps_per_epoch defaults to about one pass over the training tokens.")
      .def(
          "validation_windows",
          [](const data::TokenDataset& d, std::int64_t context) {
            return TokenWindows{d.validation_windows(context), context, std::nullopt, std::nullopt};
          },
          py::arg("context"),
          "The validation part cut into consecutive windows that do not overlap, in order.")
      .def_property_readonly("vocab_size", &data::TokenDataset::vocab_size)
      .def_property_readonly("size", &data::TokenDataset::size)
      .def_property_readonly("train_tokens", &data::TokenDataset::train_tokens)
      .def_property_readonly("validation_tokens", &data::TokenDataset::validation_tokens)
      .def(
          "windows",
          [](const data::TokenDataset& d, const std::vector<std::int64_t>& starts,
             std::int64_t context) {
            const data::Batch b = d.windows(starts, context);
            return py::make_tuple(to_numpy(b.x), to_numpy(b.y));
          },
          py::arg("starts"), py::arg("context"),
          "x (len(starts), context) and y, int32: the windows at those token offsets.");
  m.attr("FORTUNES_DIR") = data::kFortunesDir;
  m.def(
      "read_text_documents",
      [](const std::string& path) {
        std::vector<std::string> docs;
        {
          py::gil_scoped_release release;
          docs = data::read_text_documents(path);
        }
        py::list out;
        for (const std::string& d : docs) out.append(py::bytes(d));
        return out;
      },
      py::arg("path"),
      "A text file as one document, or a directory of fortune databases as their entries; "
      "bytes each.");
  m.def(
      "open_text_dataset",
      [](const std::string& path, double validation_fraction) {
        py::gil_scoped_release release;
        return data::open_text_dataset(path, {.validation_fraction = validation_fraction});
      },
      py::arg("path"), py::arg("validation_fraction") = 0.0,
      "As the CLI's --dataset text:PATH: a token file mapped, or a text file or directory of "
      "fortune databases tokenized by bytes (vocab 257, end-of-text after each document).");
  m.def(
      "read_token_file",
      [](const std::string& path) {
        std::vector<std::int32_t> ids;
        {
          py::gil_scoped_release release;
          ids = data::read_token_file(path);
        }
        py::array_t<std::int32_t> out(static_cast<py::ssize_t>(ids.size()));
        std::copy(ids.begin(), ids.end(), out.mutable_data());
        return out;
      },
      py::arg("path"), "A token file (mixprec tokenize) as an int32 NumPy array.");
  m.def(
      "write_token_file",
      [](const std::string& path, const std::vector<std::int32_t>& ids, std::int64_t vocab_size) {
        data::write_token_file(path, ids, vocab_size);
      },
      py::arg("path"), py::arg("ids"), py::arg("vocab_size"),
      "Writes ids as a token file, atomically (ValueError for an id outside the vocabulary).");
  m.def(
      "read_idx",
      [](const std::string& path) {
        Tensor t;
        {
          py::gil_scoped_release release;
          t = data::read_idx(path);
        }
        return to_numpy(t);
      },
      py::arg("path"), "An IDX file (optionally gzip-compressed) as a NumPy array.");
  // The permutations of C++'s data::BatchLoader (Fisher-Yates on mixprec's generator), so that a
  // Python Dataset.shuffle(seed=s) visits the rows in the order a C++ BatchLoader with seed s does.
  py::class_<data::BatchLoader>(m, "Shuffler")
      .def(py::init([](std::int64_t n, std::optional<std::uint64_t> seed) {
             data::Dataset rows(arange(n));
             return data::BatchLoader(rows, {.batch_size = std::max<std::int64_t>(n, 1),
                                             .shuffle = data::Shuffle::yes,
                                             .seed = seed});
           }),
           py::arg("size"), py::arg("seed") = py::none())
      .def("permutation", [](data::BatchLoader& loader) {
        const data::Epoch epoch = loader.next_epoch();
        const auto& order = epoch.order();
        py::array_t<std::int64_t> out(static_cast<py::ssize_t>(order.size()));
        std::copy(order.begin(), order.end(), out.mutable_data());
        return out;
      });
  m.def("default_fashion_mnist_dir", &data::default_fashion_mnist_dir,
        "$MIXPREC_FASHION_MNIST_DIR, else /usr/share/datasets/fashion-mnist (Debian's "
        "dataset-fashion-mnist).");
  m.def("fashion_mnist_class_names", [] {
    std::vector<std::string> names;
    for (auto n : data::fashion_mnist_class_names()) names.emplace_back(n);
    return names;
  });
}

void bind_distributed(py::module_& m) {
  using namespace distributed;
  m.def("built_with_mpi", &built_with_mpi);
  m.def("built_with_nccl", &built_with_nccl);
  m.def("initialize", &initialize, py::call_guard<py::gil_scoped_release>());
  m.def("is_initialized", &is_initialized);
  m.def("rank", &rank);
  m.def("world_size", &world_size);
  m.def("local_rank", &local_rank);
  m.def("describe", &describe);
  m.def("barrier", &barrier, py::call_guard<py::gil_scoped_release>());
  auto op = [](const std::string& name) {
    if (name == "sum") return ReduceOp::sum;
    if (name == "max") return ReduceOp::max;
    if (name == "min") return ReduceOp::min;
    throw ValueError("op must be 'sum', 'max' or 'min', got '" + name + "'");
  };
  m.def(
      "all_reduce",
      [op](Tensor& t, const std::string& name) {
        const ReduceOp o = op(name);
        py::gil_scoped_release release;
        all_reduce(t, o);
      },
      py::arg("tensor"), py::arg("op") = "sum", "Reduces a tensor across the ranks, in place.");
  m.def(
      "broadcast",
      [](Tensor& t, int root) {
        py::gil_scoped_release release;
        broadcast(t, root);
      },
      py::arg("tensor"), py::arg("root") = 0);
  py::class_<DataParallel>(m, "DataParallel",
                           "fit(..., distribute=DataParallel()) trains data-parallel over the "
                           "processes of mpirun; batch_size is then the global batch.")
      .def(py::init([](std::int64_t bucket_bytes, bool overlap) {
             return DataParallel{bucket_bytes, overlap};
           }),
           py::arg("bucket_bytes") = std::int64_t{25} * 1024 * 1024, py::arg("overlap") = true);
}

std::string info_text() {
  const auto devices = list_physical_devices();
  const auto choice = mixed_precision::pick_policy_for_device(devices);
  std::ostringstream os;
  os << "mixprec " << version() << " (Python module)\n";
  os << "build: CPU backend (oneDNN); CUDA backend: "
     << (MIXPREC_HAVE_CUDA ? "compiled in" : "not built") << "\n";
  os << "distributed: MPI " << (distributed::built_with_mpi() ? "built in" : "not built")
     << ", NCCL " << (distributed::built_with_nccl() ? "built in" : "not built") << "\n";
  os << "devices:\n";
  for (const auto& d : devices) {
    os << "  " << d.device.to_string() << " " << d.kind << " " << d.name << "\n";
    if (d.kind == "GPU") {
      os << "           compute capability " << d.compute_capability_major << "."
         << d.compute_capability_minor << "\n";
    }
    os << "           native float16 " << (d.native_float16 ? "yes" : "no") << "; native bfloat16 "
       << (d.native_bfloat16 ? "yes" : "no") << "\n";
  }
  os << "recommended policy: " << choice.policy.name() << "\n  " << choice.reason << "\n";
  for (const char* name : {"mixed_float16", "mixed_bfloat16"}) {
    const std::string warning =
        mixed_precision::policy_compatibility_warning(mixed_precision::Policy(name), devices);
    os << name << ": " << (warning.empty() ? "runs at full speed here" : warning) << "\n";
  }
  return os.str();
}

}  // namespace

void bind_extras(py::module_& m) {
  py::module_ apps = m.def_submodule("applications", "The model zoo.");
  bind_applications(apps);
  py::module_ data = m.def_submodule("data", "Data readers.");
  bind_data(data);
  py::module_ dist = m.def_submodule("distributed", "Data parallelism over MPI (and NCCL).");
  bind_distributed(dist);

  py::class_<PhysicalDevice>(m, "PhysicalDevice")
      .def_property_readonly("name", [](const PhysicalDevice& d) { return d.device.to_string(); })
      .def_readonly("device_type", &PhysicalDevice::kind)
      .def_readonly("description", &PhysicalDevice::name)
      .def_property_readonly("compute_capability",
                             [](const PhysicalDevice& d) {
                               return py::make_tuple(d.compute_capability_major,
                                                     d.compute_capability_minor);
                             })
      .def_readonly("memory_bytes", &PhysicalDevice::memory_bytes)
      .def_readonly("native_float16", &PhysicalDevice::native_float16)
      .def_readonly("native_bfloat16", &PhysicalDevice::native_bfloat16)
      .def_readonly("features", &PhysicalDevice::features)
      .def("__repr__", [](const PhysicalDevice& d) {
        return "PhysicalDevice(name='" + d.device.to_string() + "', device_type='" + d.kind +
               "', description='" + d.name + "')";
      });
  m.def(
      "list_physical_devices",
      [](py::object device_type) {
        if (device_type.is_none()) return list_physical_devices();
        return list_physical_devices(device_type.cast<std::string>());
      },
      py::arg("device_type") = py::none(), "The CPU and each CUDA GPU ('CPU' or 'GPU' filters).");
  m.def("set_seed", &set_seed, py::arg("seed"),
        "Reseeds mixprec's default generator (weights, shuffling, dropout).");
  m.def("clear_session", &clear_session, "Restarts the automatic layer names (dense, dense_1...).");
  m.def("info", &info_text, "What `python3 -m mixprec info` prints.");
}

}  // namespace mixprec::python
