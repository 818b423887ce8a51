// The io_uring disk tier: DiskTier over one kv::DiskTierFile.
#include "actors/disk_tier.hpp"

#include "gpu/kv/disk_tier_file.hpp"

namespace pensieve::actors {

namespace asio = boost::asio;

namespace {

class FileDiskTier final : public DiskTier {
 public:
  explicit FileDiskTier(std::unique_ptr<kv::DiskTierFile> file) : file_(std::move(file)) {}

  std::int64_t slots() const override { return file_->slot_count(); }

  asio::awaitable<Result<void>> write(DiskSlot slot, const kv::KvPool& host, HostSlot from,
                                      std::span<const std::int32_t> tokens, const kv::ChunkLabel& label) override {
    auto r = co_await file_->write(slot, host, kv::BlockId{from.value}, tokens, &label);
    if (!r) co_return fail(r.error().message);
    co_return Result<void>{};
  }

  asio::awaitable<Result<ChunkReadStatus>> read(DiskSlot slot, kv::KvPool& host, HostSlot to,
                                                std::span<const std::int32_t> tokens) override {
    auto r = co_await file_->read(slot, host, kv::BlockId{to.value}, tokens);
    if (r) co_return ChunkReadStatus::ok;
    if (r.error().unusable_chunk()) co_return ChunkReadStatus::corrupt;
    co_return fail(r.error().message);
  }

 private:
  std::unique_ptr<kv::DiskTierFile> file_;
};

}  // namespace

Result<std::shared_ptr<DiskTier>> open_disk_tier(const asio::any_io_executor& executor, const std::string& dir,
                                                 std::uint64_t budget_bytes, const kv::KvPoolConfig& host,
                                                 std::uint64_t identity, bool persistent, DiskTierFound* found) {
  auto ring = rt::IoRing::create(executor);
  if (!ring) return ring.error();
  kv::DiskTierFileConfig config = kv::disk_layout_of(host);
  config.dir = dir;
  config.budget_bytes = budget_bytes;
  config.identity = identity;
  config.persistent = persistent;
  auto store = kv::DiskTierFile::open(std::move(*ring), std::move(config));
  if (!store) return store.error();
  if (found) *found = DiskTierFound{disk_chunks_of((*store)->scanned()), (*store)->scan_report()};
  return std::shared_ptr<DiskTier>(std::make_shared<FileDiskTier>(std::move(*store)));
}

}  // namespace pensieve::actors
