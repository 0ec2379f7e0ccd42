// The data sets `frugal train --dataset NAME` can load, from their Debian packages:
//   fashion-mnist  Fashion-MNIST images (data.h), package dataset-fashion-mnist, for mlp, cnn,
//                  resnet20 and vgg
//   fortunes       the fortunes text corpus, windows of 64 characters (text_corpus.h), packages
//                  fortunes and fortunes-min, for charlstm
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "frugal/status.h"
#include "frugal_torch/data.h"

namespace frugal_torch {

std::vector<std::string> DatasetNames();

// kInvalidArgument naming the known data sets for an unknown name.
frugal::Status CheckDatasetName(std::string_view name);

// The package's directory of `name`.
std::string DefaultDataDir(std::string_view name);

// The data set a model is built for ("fortunes" for charlstm, "fashion-mnist" for the others).
std::string DatasetOfModel(std::string_view model);

// Whether the files are there (cheap): kNotFound naming the Debian package otherwise.
frugal::Status CheckDatasetFiles(std::string_view name, const std::string& dir);

// Loads the training and test sets (the fortunes split is fixed: split seed 1).
frugal::StatusOr<FashionMnist> LoadDataset(std::string_view name, const std::string& dir);

// The labels of the training set (the partitions' classes), as LoadDataset's.
frugal::StatusOr<std::vector<uint8_t>> LoadTrainLabels(std::string_view name,
                                                       const std::string& dir);

}  // namespace frugal_torch
