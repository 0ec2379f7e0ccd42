// The data sets by name (see dataset.h).
#include "frugal_torch/dataset.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>

#include "frugal_torch/text_corpus.h"

namespace frugal_torch {

std::vector<std::string> DatasetNames() { return {"fashion-mnist", "fortunes"}; }

frugal::Status CheckDatasetName(std::string_view name) {
  for (const std::string& known : DatasetNames()) {
    if (name == known) return frugal::Status::Ok();
  }
  return frugal::InvalidArgumentError(
      fmt::format("unknown dataset '{}' (known: {})", name, fmt::join(DatasetNames(), ", ")));
}

std::string DefaultDataDir(std::string_view name) {
  return name == "fortunes" ? kFortunesDir : kFashionMnistDir;
}

std::string DatasetOfModel(std::string_view model) {
  return model == "charlstm" ? "fortunes" : "fashion-mnist";
}

frugal::Status CheckDatasetFiles(std::string_view name, const std::string& dir) {
  FRUGAL_RETURN_IF_ERROR(CheckDatasetName(name));
  std::error_code ec;
  if (name == "fortunes") {
    if (!std::filesystem::is_regular_file(dir + "/fortunes", ec)) {
      return frugal::NotFoundError(fmt::format(
          "fortunes corpus {} not found (install the Debian packages {})", dir, kFortunesPackages));
    }
    return frugal::Status::Ok();
  }
  for (const char* file : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                           "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}) {
    const std::string path = dir + "/" + file;
    if (!std::filesystem::is_regular_file(path, ec)) {
      return frugal::NotFoundError(
          fmt::format("Fashion-MNIST file {} not found (install the Debian package {})", path,
                      kFashionMnistPackage));
    }
  }
  return frugal::Status::Ok();
}

frugal::StatusOr<FashionMnist> LoadDataset(std::string_view name, const std::string& dir) {
  FRUGAL_RETURN_IF_ERROR(CheckDatasetName(name));
  if (name == "fortunes") {
    FRUGAL_ASSIGN_OR_RETURN(TextCorpus corpus, LoadFortunes(dir));
    return std::move(corpus.data);
  }
  return LoadFashionMnist(dir);
}

frugal::StatusOr<std::vector<uint8_t>> LoadTrainLabels(std::string_view name,
                                                       const std::string& dir) {
  FRUGAL_RETURN_IF_ERROR(CheckDatasetName(name));
  if (name == "fortunes") {
    FRUGAL_ASSIGN_OR_RETURN(TextCorpus corpus, LoadFortunes(dir));
    return std::move(corpus.data.train.labels);
  }
  FRUGAL_ASSIGN_OR_RETURN(IdxFile labels, ReadIdxFile(dir + "/train-labels-idx1-ubyte.gz"));
  return std::move(labels.data);
}

}  // namespace frugal_torch
