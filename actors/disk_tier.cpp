#include "actors/disk_tier.hpp"

#include "gpu/kv/disk_chunk_store.hpp"

namespace pensieve::actors {

namespace asio = boost::asio;

namespace {

class DiskTier final : public ChunkStore {
 public:
  explicit DiskTier(std::unique_ptr<kv::DiskChunkStore> store) : store_(std::move(store)) {}

  std::int64_t slots() const override { return store_->slot_count(); }

  asio::awaitable<Result<void>> write(DiskSlot slot, const kv::KvPool& host, HostSlot from,
                                      std::span<const std::int32_t> tokens) override {
    auto r = co_await store_->write(kv::DiskSlot{slot.value}, host, kv::BlockId{from.value}, tokens);
    if (!r) co_return fail(r.error().message);
    co_return Result<void>{};
  }

  asio::awaitable<Result<ChunkReadStatus>> read(DiskSlot slot, kv::KvPool& host, HostSlot to,
                                                std::span<const std::int32_t> tokens) override {
    auto r = co_await store_->read(kv::DiskSlot{slot.value}, host, kv::BlockId{to.value}, tokens);
    if (r) co_return ChunkReadStatus::ok;
    if (r.error().unusable_chunk()) co_return ChunkReadStatus::corrupt;
    co_return fail(r.error().message);
  }

 private:
  std::unique_ptr<kv::DiskChunkStore> store_;
};

}  // namespace

Result<std::shared_ptr<ChunkStore>> open_disk_tier(const asio::any_io_executor& executor, const std::string& dir,
                                                   std::uint64_t budget_bytes, const kv::KvPoolConfig& host) {
  auto ring = rt::IoRing::create(executor);
  if (!ring) return ring.error();
  kv::DiskChunkStoreConfig config = kv::disk_layout_of(host);
  config.dir = dir;
  config.budget_bytes = budget_bytes;
  auto store = kv::DiskChunkStore::open(std::move(*ring), std::move(config));
  if (!store) return store.error();
  return std::shared_ptr<ChunkStore>(std::make_shared<DiskTier>(std::move(*store)));
}

}  // namespace pensieve::actors
