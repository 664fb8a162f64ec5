// Training data: the idx format (MNIST, Fashion-MNIST; gzip-compressed or not) and a loader that
// shuffles, batches and prepares the next batch on a background thread while the current one
// trains (torch.utils.data.DataLoader with one worker).
#pragma once
#include <ingot/export.h>
#include <ingot/tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

INGOT_API_BEGIN
namespace ingot::data {

// An idx file (http://yann.lecun.com/exdb/mnist/): its magic number's dtype and dims, e.g. uint8
// [60000, 28, 28] for images and uint8 [60000] for labels. Reads .gz files through zlib.
Tensor read_idx(const std::string& path);

struct Batch {
  Tensor inputs, targets;  // on the loader's device
  int64_t index = 0;       // the batch's number within the epoch
};

struct LoaderOptions {
  int64_t batch_size = 64;
  bool shuffle = true;
  bool drop_last = false;
  Device device = Device::cpu();
  // Runs on the loader's thread on each batch's rows (CPU tensors: inputs [B, ...], targets [B, ...])
  // before the copy to the device: conversion to float, normalization, augmentation.
  std::function<void(Tensor& inputs, Tensor& targets)> transform = nullptr;
  // Data-parallel training (torch.utils.data.DistributedSampler's rule): this process is rank `rank`
  // of `world_size`. Each epoch every rank draws the same order, from `seed` and the epoch's number
  // (so the ranks agree without talking), pads it by repeating its start to a multiple of
  // world_size (or, with drop_last, cuts it to one), and takes rows rank, rank + world_size, ...:
  // each rank the same number of rows, together every row. Shuffling draws from `seed` then, not
  // from ingot::manual_seed's generator.
  int64_t world_size = 1;
  int64_t rank = 0;
  uint64_t seed = 0;
};

// Iterates over (inputs[i], targets[i]) rows in batches: each epoch a fresh order (drawn from the
// generator that ingot::manual_seed seeds) when shuffling. next() returns the next batch of the
// epoch (prepared while the previous one was used), nullopt at the epoch's end; the following
// next() starts a new epoch.
class DataLoader {
 public:
  DataLoader(Tensor inputs, Tensor targets, LoaderOptions options = {});
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;
  std::optional<Batch> next();
  int64_t batches_per_epoch() const;
  int64_t size() const;  // rows (of this rank's share when world_size > 1)
  // The next epoch's number (counted from 0; each epoch started adds one): with world_size > 1 it
  // picks the epoch's order, so a run resumed from a checkpoint sets it to continue the same orders.
  void set_epoch(int64_t epoch);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace ingot::data
INGOT_API_END
